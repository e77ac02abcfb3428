package console

import "errors"

// The console's own refusals; the rest are tipkv's errors (ErrInvalid for
// a bad parameter, ErrNotFound for a name or version that is not there,
// ErrClosed once the DB closed), each answered with its HTTP status.
var (
	// errNoRoute is a path the console does not serve (404).
	errNoRoute = errors.New("console: no such page")
	// errReadOnly refuses an action of a console without
	// Options.Authorize (403).
	errReadOnly = errors.New("console: read-only: actions are off (Options.Authorize is nil)")
	// errToken refuses an action whose CSRF token is missing or does not
	// match the console's cookie (403).
	errToken = errors.New("console: missing or bad CSRF token: load a page (or GET /api/token) and send its token")
	// errRefused refuses an action that Options.Authorize refused, or a
	// request from another site (403).
	errRefused = errors.New("console: action refused")
)
