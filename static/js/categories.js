// Category pages: selecting items for a split, confirming destructive forms,
// and showing the inline rename form's validation errors.
(function () {
  "use strict";

  // htmx leaves 4xx answers unswapped; a 422 carries the form with its error
  // message, which is exactly what the reviewer needs to see.
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (event.detail.xhr && event.detail.xhr.status === 422) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  // Forms that change a lot at once (merge, archive, delete) ask first.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  });

  function updateCount(form) {
    var counter = form.querySelector("[data-selected-count]");
    if (counter) {
      counter.textContent = form.querySelectorAll("input[name=items]:checked").length;
    }
  }

  document.addEventListener("change", function (event) {
    var box = event.target;
    if (!box.form) {
      return;
    }
    if (box.hasAttribute("data-select-all")) {
      box.form.querySelectorAll("input[name=items]").forEach(function (item) {
        item.checked = box.checked;
      });
    }
    if (box.hasAttribute("data-select-all") || box.name === "items") {
      updateCount(box.form);
    }
  });
})();
