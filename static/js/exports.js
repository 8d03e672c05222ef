// Dataset pages: destructive forms ask first; while an export runs the
// button waits, and when the polled status row reports the end it is enabled.
(function () {
  "use strict";

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  });

  document.addEventListener("htmx:afterSettle", function () {
    var status = document.getElementById("export-status");
    var button = document.getElementById("export-now");
    if (!status || !button) {
      return;
    }
    var state = status.getAttribute("data-status");
    button.disabled = state === "queued" || state === "running";
  });
})();
