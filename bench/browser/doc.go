// Package browser opens the admin dashboard of the built sluice binary in
// headless Chromium (github.com/chromedp/chromedp). It has only tests, and
// lives in the bench module so that the library's module does not depend on
// a browser driver. Without Chromium the tests skip, or fail under CI=true;
// $SLUICE_CHROMIUM names the executable and $SLUICE_ARTIFACTS the directory
// for the screenshot.
package browser
