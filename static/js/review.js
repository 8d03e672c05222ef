// Keyboard shortcuts of the item page (see the ? overlay). No inline
// scripts: everything the page tells us comes from data attributes.
(function () {
  "use strict";

  const root = document.getElementById("review");
  if (!root) return;
  const form = document.getElementById("label-form");
  const overlay = document.getElementById("shortcuts");
  const skipForm = document.getElementById("skip-form");
  const select = document.getElementById("id_category");
  const chips = Array.from(document.querySelectorAll(".suggestions [data-pick]"));
  const severity = document.getElementById("id_severity");
  const tagsField = document.getElementById("tags-field");
  const side = document.querySelector(".review-side");

  // The panel ends at the window's bottom edge wherever the page is scrolled, so
  // Save (below the panel's scrolling fields) is always in view and covers nothing.
  function fitPanel() {
    if (!side || getComputedStyle(side).position !== "sticky") {
      if (side) side.style.maxHeight = "";
      return;
    }
    const top = Math.max(side.getBoundingClientRect().top, 0);
    side.style.maxHeight = Math.max(240, window.innerHeight - top - 12) + "px";
  }
  fitPanel();
  window.addEventListener("resize", fitPanel);
  window.addEventListener("scroll", fitPanel, { passive: true });

  // The undo offer after a save counts down and then goes: the server refuses it soon after.
  const undoBar = document.getElementById("undo-bar");
  if (undoBar) {
    let left = parseInt(undoBar.dataset.seconds, 10) || 0;
    const counter = document.getElementById("undo-seconds");
    const timer = window.setInterval(function () {
      left -= 1;
      if (counter) counter.textContent = String(Math.max(left, 0));
      if (left <= 0) { window.clearInterval(timer); undoBar.remove(); }
    }, 1000);
  }

  // After t, number keys tick tags instead of picking categories, until Esc, t or another key.
  let tagMode = false;
  function setTagMode(on) {
    tagMode = on;
    if (tagsField) {
      tagsField.classList.toggle("tag-mode", on);
      if (on) tagsField.scrollIntoView({ block: "nearest" });
    }
  }
  function toggleTag(key) {
    if (!tagsField) return false;
    const box = tagsField.querySelector('input[type="checkbox"][data-key="' + key + '"]');
    if (!box) return false;
    box.checked = !box.checked;
    return true;
  }

  const SEVERITIES = { Digit0: "", Digit1: "low", Digit2: "medium", Digit3: "high", Digit4: "critical" };
  function setSeverity(code) {
    if (!severity || !(code in SEVERITIES)) return false;
    severity.value = SEVERITIES[code];
    severity.dispatchEvent(new Event("change", { bubbles: true }));
    return true;
  }
  function setSplit(value) {
    if (!form) return;
    const radio = form.querySelector('input[name="split"][value="' + value + '"]');
    if (radio) radio.checked = true;
  }
  function openCorrected() {
    const details = document.getElementById("corrected-details");
    const field = document.getElementById("id_corrected_response");
    if (details) details.open = true;
    if (field) field.focus();
  }

  // Fields where a key is text, not a command. Checkboxes and radios are
  // not: after ticking a tag the reviewer should still be able to press c.
  const TEXT_INPUT = /^(text|search|email|url|number|password|tel)$/;
  function isTyping(element) {
    if (!element || element === document.body) return false;
    if (element.isContentEditable) return true;
    const tag = element.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT") return true;
    return tag === "INPUT" && TEXT_INPUT.test(element.type || "text");
  }

  function overlayOpen() { return overlay && !overlay.hidden; }
  function showOverlay() {
    if (!overlay) return;
    overlay.hidden = false;
    const close = document.getElementById("shortcuts-close");
    if (close) close.focus();
  }
  function hideOverlay() { if (overlay) overlay.hidden = true; }

  function go(url) { if (url) window.location.assign(url); }

  function pick(categoryId) {
    if (!select) return;
    select.value = String(categoryId);
    select.setCustomValidity("");
    syncChips();
  }
  function syncChips() {
    chips.forEach(function (chip) {
      const on = select && chip.dataset.pick === select.value;
      chip.classList.toggle("picked", on);
      chip.setAttribute("aria-pressed", on ? "true" : "false");
    });
  }

  // c confirms a failure: without a category it would join none, which is
  // rarely meant. Ask for one (the Save button still allows it on purpose).
  function needsCategory() {
    if (!select || select.value !== "" || select.options.length < 2) return false;
    select.setCustomValidity("Pick this failure's category first: a number key or this list.");
    select.reportValidity();
    return true;
  }

  function submitWithVerdict(verdict) {
    if (!form) return;
    const radio = form.querySelector('input[name="verdict"][value="' + verdict + '"]');
    if (radio) radio.checked = true;
    if (form.requestSubmit) form.requestSubmit(); else form.submit();
  }

  function skip() {
    if (skipForm) {
      if (skipForm.requestSubmit) skipForm.requestSubmit(); else skipForm.submit();
    } else {
      go(root.dataset.nextUrl);
    }
  }

  chips.forEach(function (chip) {
    chip.addEventListener("click", function () { pick(chip.dataset.pick); });
  });
  if (select) {
    select.addEventListener("change", function () {
      select.setCustomValidity("");
      syncChips();
      // Leave the list: keys are commands again, and the browser's
      // type-to-select can no longer change the choice behind the reviewer.
      select.blur();
    });
  }

  const open = document.getElementById("shortcuts-open");
  if (open) open.addEventListener("click", showOverlay);
  const close = document.getElementById("shortcuts-close");
  if (close) close.addEventListener("click", hideOverlay);
  if (overlay) overlay.addEventListener("click", function (event) { if (event.target === overlay) hideOverlay(); });

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return;
    const key = event.key;
    if (key === "Escape") {
      if (overlayOpen()) { hideOverlay(); event.preventDefault(); return; }
      if (tagMode) { setTagMode(false); event.preventDefault(); return; }
      if (isTyping(document.activeElement)) { document.activeElement.blur(); event.preventDefault(); }
      return;
    }
    if (isTyping(event.target)) return;
    if (overlayOpen()) {
      if (key === "?") { hideOverlay(); event.preventDefault(); }
      return;
    }

    // Severity reads the physical key: shift+1 is "!" on one layout and "1" or "&" on others.
    if (event.shiftKey && /^Digit[0-4]$/.test(event.code)) {
      if (setSeverity(event.code)) event.preventDefault();
      return;
    }
    if (tagMode) {
      if (key >= "0" && key <= "9") { toggleTag(key); event.preventDefault(); return; }
      setTagMode(false);
      if (key === "t") { event.preventDefault(); return; }
    }
    if (key >= "1" && key <= "9") {
      const chip = chips.find(function (c) { return c.dataset.number === key; });
      if (chip) { pick(chip.dataset.pick); event.preventDefault(); }
      return;
    }
    switch (key) {
      case "?": showOverlay(); break;
      // In queue mode the current item is locked and unlabelled: moving on
      // must release it, which is what skip does.
      case "j": if (root.dataset.queue) skip(); else go(root.dataset.nextUrl); break;
      case "k": go(root.dataset.previousUrl); break;
      case "c": if (!needsCategory()) submitWithVerdict("failure"); break;
      case "n": submitWithVerdict("not_failure"); break;
      case "h": {
        const hint = document.getElementById("id_hint");
        if (!hint) return;
        hint.focus();
        break;
      }
      case "s": skip(); break;
      case "t": setTagMode(true); break;
      case "g": openCorrected(); break;
      case "r": setSplit("train"); break;
      case "e": setSplit("eval"); break;
      case "u": setSplit("none"); break;
      default: return;
    }
    event.preventDefault();
  });
})();
