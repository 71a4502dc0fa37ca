package recipe

import "fmt"

// SettingError is a recipe's refusal of one or more of its settings.
// Settings names them as Accelerate's fp8_config does ("margin",
// "fp8_format", "x_block_scaling_dim"), so that a caller can say where
// each came from (a flag, a variable, a config file) without reading
// the message:
//
//	var se *recipe.SettingError
//	if errors.As(err, &se) { … se.Settings … }
type SettingError struct {
	// Settings are the refused settings, by their Accelerate names.
	Settings []string
	// Err says what is wrong.
	Err error
}

// Error returns Err's message.
func (e *SettingError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *SettingError) Unwrap() error { return e.Err }

// refuse returns a SettingError for the settings, with a formatted
// message.
func refuse(settings []string, format string, a ...any) error {
	return &SettingError{Settings: settings, Err: fmt.Errorf(format, a...)}
}

// on names the settings an error refuses.
func on(settings ...string) []string { return settings }
