package ops

// FastTanhForTest exposes fastTanh to the external tests.
var FastTanhForTest = fastTanh
