// Package e2e holds the console's end-to-end tests: they fill a Pebble
// store through tipkv's public packages, mount console.Console on an
// httptest server as a service would, and drive headless Chromium
// (Debian's chromium package, found on PATH or named by $CHROMIUM) with
// chromedp: pages and their content, a document's history and a diff
// chosen in its form, a live tail that shows an event appended after the
// page loaded, a dead letter requeued and one discarded through their
// forms, and forms without the token or from another site refused.
//
// It is a module of its own so that the core module does not depend on
// chromedp. install-chromium.sh installs the browser where it is missing;
// CI runs it before these tests. Without a browser the tests skip, unless
// $CI is set: then they fail.
//
//	go test ./console/e2e/ -screenshots ../../docs/console
//
// also writes PNG screenshots of the main pages into docs/console.
package e2e
