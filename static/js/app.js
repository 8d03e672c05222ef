// Shared behaviour of every page. Page scripts live beside it in static/js/.
// No inline scripts: the pages are served with a Content-Security-Policy.
