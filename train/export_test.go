package train

// SetSaveHook lets the tests stop a process in the middle of a save.
func SetSaveHook(f func(stage string)) { saveHook = f }
