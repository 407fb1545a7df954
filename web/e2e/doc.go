// Package e2e holds the cockpit's end-to-end browser tests: they build and
// start the real studio binary with a script model and drive headless
// Chromium with chromedp. The package has no code of its own.
package e2e
