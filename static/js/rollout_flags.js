// Marks each flagged tool call in the transcript once the flags panel has loaded (#rollout-flags, htmx):
// the call opens, gets the flagged style and a badge naming its checks. Dismissed flags mark nothing.
(function () {
  function mark(panel) {
    var byAnchor = {};
    panel.querySelectorAll("[data-anchor]").forEach(function (flag) {
      if (flag.dataset.status === "dismissed") return;
      (byAnchor[flag.dataset.anchor] = byAnchor[flag.dataset.anchor] || []).push(flag.dataset.title);
    });
    Object.keys(byAnchor).forEach(function (anchor) {
      var spot = document.getElementById(anchor);
      var call = spot && spot.closest("details.tool-call");
      if (!call || call.classList.contains("tool-call-flagged")) return;
      call.classList.add("tool-call-flagged");
      call.open = true;
      var badge = document.createElement("span");
      badge.className = "pill flag-badge";
      badge.title = "Rollout flag";
      badge.textContent = "\u2691 " + byAnchor[anchor].join(", ");
      spot.after(badge, " ");
    });
  }
  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.target && event.target.id === "rollout-flags") mark(event.target);
  });
})();
