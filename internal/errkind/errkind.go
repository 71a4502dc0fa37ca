// Package errkind marks an error with a sentinel kind that callers test
// with errors.Is, keeping the error's own chain and message.
package errkind

// With returns err that also matches kind (errors.Is), its message and
// chain unchanged.
func With(err, kind error) error { return &kinded{err, kind} }

type kinded struct{ err, kind error }

func (e *kinded) Error() string   { return e.err.Error() }
func (e *kinded) Unwrap() []error { return []error{e.err, e.kind} }
