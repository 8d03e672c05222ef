// Selection for bulk actions: a checkbox per row, shift-click for a range,
// "select all N matching" (the page's filter becomes the selection), and
// only the field the chosen action needs shown beside it.
(function () {
  "use strict";

  function barOf(element) {
    var form = element.form || (element.closest && element.closest("form"));
    return form ? form.querySelector("[data-bulk-bar]") : null;
  }

  function rows(form) {
    return Array.prototype.slice.call(form.querySelectorAll("input[type=checkbox][name=items]"));
  }

  function refresh(form) {
    var bar = form.querySelector("[data-bulk-bar]");
    if (!bar) {
      return;
    }
    var all = bar.querySelector("[data-bulk-all]");
    var count = bar.querySelector("[data-bulk-count]");
    var ticked = rows(form).filter(function (box) { return box.checked; }).length;
    count.textContent = all.checked ? bar.getAttribute("data-total") : String(ticked);
    bar.classList.toggle("bulk-all-on", all.checked);
    bar.querySelector("[data-bulk-apply]").disabled = !all.checked && ticked === 0;
  }

  function showFields(bar) {
    var chosen = bar.querySelector("[data-bulk-action]").value;
    bar.querySelectorAll("[data-bulk-for]").forEach(function (span) {
      var wanted = span.getAttribute("data-bulk-for").split(" ").indexOf(chosen) >= 0;
      span.hidden = !wanted;
      span.querySelectorAll("select, input").forEach(function (field) { field.disabled = !wanted; });
    });
  }

  var lastClicked = null;

  document.addEventListener("click", function (event) {
    var box = event.target;
    if (!(box instanceof HTMLInputElement) || box.name !== "items" || !barOf(box)) {
      return;
    }
    // Shift-click ticks (or clears) every row between the last click and this one.
    if (event.shiftKey && lastClicked && lastClicked !== box && lastClicked.form === box.form) {
      var list = rows(box.form);
      var from = list.indexOf(lastClicked);
      var to = list.indexOf(box);
      if (from >= 0 && to >= 0) {
        list.slice(Math.min(from, to), Math.max(from, to) + 1).forEach(function (other) {
          other.checked = box.checked;
        });
      }
    }
    lastClicked = box;
  });

  document.addEventListener("change", function (event) {
    var box = event.target;
    var bar = box && barOf(box);
    if (!bar) {
      return;
    }
    var form = bar.closest("form");
    if (box.hasAttribute("data-bulk-action")) {
      showFields(bar);
      return;
    }
    if (box.hasAttribute("data-bulk-all") || box.hasAttribute("data-bulk-page")) {
      rows(form).forEach(function (item) { item.checked = box.checked; });
      if (box.hasAttribute("data-bulk-page") && !box.checked) {
        bar.querySelector("[data-bulk-all]").checked = false;
      }
    } else if (box.name === "items" && !box.checked) {
      // Clearing one row means the selection is no longer "everything matching".
      bar.querySelector("[data-bulk-all]").checked = false;
    }
    // Other scripts may tick the rows in their own handler of the same event.
    window.setTimeout(function () { refresh(form); }, 0);
  });

  // Enter in the tags field applies the bulk action, not whatever else the form does.
  document.addEventListener("keydown", function (event) {
    var field = event.target;
    if (event.key === "Enter" && field && field.id === "bulk-tags") {
      event.preventDefault();
      var bar = barOf(field);
      if (bar) {
        bar.querySelector("[data-bulk-apply]").click();
      }
    }
  });

  function setUp() {
    document.querySelectorAll("[data-bulk-bar]").forEach(function (bar) {
      showFields(bar);
      refresh(bar.closest("form"));
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUp);
  } else {
    setUp();
  }
})();
