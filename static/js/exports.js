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

// Dataset builder: the category search narrows the picker, and any change to the
// definition asks the preview again once typing has paused, so the counts follow
// the filters without a request per keystroke.
(function () {
  "use strict";

  var PREVIEW_DELAY_MS = 400;
  // The preview asks with GET and reads only the filters, purpose and formats: the CSRF token has no
  // business in an address, and a long description would only push it past a server's request-line limit.
  var NOT_PREVIEWED = ["csrfmiddlewaretoken", "name", "description"];

  function normalised(text) {
    return (text || "").toLowerCase().replace(/\s+/g, " ").trim();
  }

  function categorySearch(picker, query) {
    var wanted = normalised(query);
    var anyShown = false;
    picker.querySelectorAll(".exp-picker-area").forEach(function (group) {
      // An area's name matching shows all of its categories.
      var areaMatches = wanted !== "" && normalised(group.getAttribute("data-area")).indexOf(wanted) !== -1;
      var shownInGroup = 0;
      group.querySelectorAll(".exp-picker-option").forEach(function (option) {
        var shown = wanted === "" || areaMatches || normalised(option.getAttribute("data-name")).indexOf(wanted) !== -1;
        option.hidden = !shown;
        if (shown) { shownInGroup += 1; }
      });
      group.hidden = shownInGroup === 0;
      if (shownInGroup) { anyShown = true; }
    });
    var none = document.getElementById("category-no-match");
    if (none) { none.hidden = anyShown; }
  }

  function chosenCount(picker) {
    var count = picker.querySelectorAll("input[name=categories]:checked").length;
    var label = document.getElementById("category-chosen");
    if (label) { label.textContent = count ? count + " chosen" : "any"; }
  }

  function previewedQuery(form) {
    var data = new FormData(form);
    NOT_PREVIEWED.forEach(function (name) { data.delete(name); });
    return new URLSearchParams(data).toString();
  }

  function setUp() {
    var form = document.getElementById("dataset-form");
    var preview = document.getElementById("dataset-preview");
    var picker = document.getElementById("category-picker");
    var search = document.getElementById("category-search");
    if (!form || !preview) {
      return;
    }
    if (picker) {
      chosenCount(picker);
    }
    var timer = null;
    // What the preview was last asked for: a "change" that follows the "input" it already
    // answered (a field losing focus) asks nothing new.
    var lastAsked = previewedQuery(form);
    function definitionChanged(event) {
      if (event.target === search) {
        categorySearch(picker, search.value);
        return;
      }
      if (picker && event.target.name === "categories") {
        chosenCount(picker);
      }
      window.clearTimeout(timer);
      timer = window.setTimeout(function () {
        var query = previewedQuery(form);
        if (query !== lastAsked) {
          lastAsked = query;
          window.htmx.trigger(preview, "filters-changed");
        }
      }, PREVIEW_DELAY_MS);
    }
    form.addEventListener("input", definitionChanged);
    form.addEventListener("change", definitionChanged);
    // Enter in the search box narrows the list; it must not submit the form.
    if (search) {
      search.addEventListener("keydown", function (event) {
        if (event.key === "Enter") { event.preventDefault(); }
      });
    }
  }

  document.addEventListener("htmx:configRequest", function (event) {
    if (event.detail.elt && event.detail.elt.id === "dataset-preview") {
      NOT_PREVIEWED.forEach(function (name) { delete event.detail.parameters[name]; });
    }
  });

  // A filter the dataset could not be saved with answers 422 with its message: show it in place of the counts.
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (event.detail.target && event.detail.target.id === "dataset-preview" && event.detail.xhr.status === 422) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUp);
  } else {
    setUp();
  }
})();
