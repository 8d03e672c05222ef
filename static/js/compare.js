// The compare page's two charts, drawn from the JSON the page carries (no inline script: CSP).
// 1. Per-category difference in thumbs-down rate (b - a), sorted, with 95% whiskers;
//    clicking a bar (or anywhere on its row) opens the search for the items behind it.
// 2. Thumbs-up rate over time per side and variant, each line with its 95% band.
(function () {
  "use strict";
  // The table's folds: one line stands for the rows too small to test; a click shows or hides them.
  document.querySelectorAll("button[data-fold]").forEach(function (button) {
    button.addEventListener("click", function () {
      var open = button.getAttribute("aria-expanded") !== "true";
      document.querySelectorAll('tbody[data-folded="' + button.dataset.fold + '"]').forEach(function (body) {
        body.hidden = !open;
      });
      button.setAttribute("aria-expanded", open ? "true" : "false");
      button.textContent = (open ? "▾" : "▸") + button.textContent.slice(1);
    });
  });
})();

(function () {
  "use strict";

  var source = document.getElementById("compare-data");
  if (!source || !window.Chart) return;
  var data = JSON.parse(source.textContent);

  var RED = "#c0392b", GREEN = "#1e8449", GREY = "#aab2bf";
  var pp = function (v) { return (v > 0 ? "+" : "") + (v * 100).toFixed(1) + " pp"; };
  var pct = function (v) { return Math.round(v * 100) + "%"; };

  function translucent(hex, alpha) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + alpha + ")";
  }

  // Chart.js has no error bars: draw each bar's interval as a whisker after the bars.
  var whiskers = {
    id: "cmpWhiskers",
    afterDatasetsDraw: function (chart) {
      var meta = chart.getDatasetMeta(0);
      var x = chart.scales.x, ctx = chart.ctx, area = chart.chartArea;
      ctx.save();
      ctx.beginPath();
      ctx.rect(area.left, area.top, area.right - area.left, area.bottom - area.top);
      ctx.clip();
      ctx.strokeStyle = "#1d2430";
      ctx.lineWidth = 1.2;
      meta.data.forEach(function (bar, i) {
        var row = data.differences[i];
        if (row.low === null || row.high === null) return;
        var left = x.getPixelForValue(row.low), right = x.getPixelForValue(row.high), y = bar.y, cap = 4;
        ctx.beginPath();
        ctx.moveTo(left, y); ctx.lineTo(right, y);
        ctx.moveTo(left, y - cap); ctx.lineTo(left, y + cap);
        ctx.moveTo(right, y - cap); ctx.lineTo(right, y + cap);
        ctx.stroke();
      });
      ctx.restore();
    },
  };

  function drawDifferences() {
    var canvas = document.getElementById("cmp-diff-chart");
    var box = document.getElementById("cmp-diff-box");
    if (!canvas || !box) return;
    var rows = data.differences;
    // One readable row per category: the box grows with the list.
    box.style.height = Math.max(220, rows.length * 26 + 70) + "px";
    // The axis must hold the whiskers, not just the bars.
    var bounds = rows.reduce(function (acc, row) {
      return [Math.min(acc[0], row.low === null ? 0 : row.low), Math.max(acc[1], row.high === null ? 0 : row.high)];
    }, [0, 0]);
    var colour = function (row) {
      if (!row.significant) return GREY;
      return row.direction === "worse" ? RED : GREEN;
    };
    new window.Chart(canvas, {
      type: "bar",
      data: {
        labels: rows.map(function (row) {
          var label = row.label.length > 60 ? row.label.slice(0, 57) + "…" : row.label;
          return row.is_new ? label + " (new)" : label;
        }),
        datasets: [{
          label: data.b + " − " + data.a,
          data: rows.map(function (row) { return row.difference; }),
          backgroundColor: rows.map(colour),
          borderWidth: 0,
          barPercentage: 0.8,
        }],
      },
      options: {
        indexAxis: "y",
        animation: false,
        maintainAspectRatio: false,
        // A click anywhere on a category's row counts, so tiny bars stay clickable.
        interaction: { mode: "y", intersect: false },
        scales: {
          x: { suggestedMin: bounds[0], suggestedMax: bounds[1], ticks: { callback: function (v) { return pp(v); } }, grid: { color: function (c) { return c.tick.value === 0 ? "#1d2430" : "#e2e6ec"; } } },
          y: { ticks: { autoSkip: false } },
        },
        plugins: {
          legend: { display: false },
          tooltip: { callbacks: {
            title: function (items) { return rows[items[0].dataIndex].label; },
            label: function (ctx) {
            var row = rows[ctx.dataIndex];
            var text = pp(row.difference) + "  95% CI [" + pp(row.low) + ", " + pp(row.high) + "]";
            return row.significant ? text + (row.direction === "worse" ? " · significantly worse" : " · significantly better") : text;
          } } },
        },
        onHover: function (event, elements) {
          event.native.target.style.cursor = elements.length ? "pointer" : "default";
        },
        onClick: function (event, elements) {
          if (elements.length) window.location.assign(rows[elements[0].index].url);
        },
      },
      plugins: [whiskers],
    });
    box.setAttribute("data-ready", "true");
  }

  function drawSeries() {
    var canvas = document.getElementById("cmp-series-chart");
    if (!canvas) return;
    var series = data.series;
    var labels = series.buckets.map(function (day) { return day.slice(5); });
    var datasets = [];
    var sideColour = { a: "#7f8c8d", b: "#2b5fd9" };
    var variantPalette = ["#d9822b", "#8e44ad", "#16a085", "#b7950b", "#c0392b", "#1e8449"];
    var breakdowns = 0;
    series.lines.forEach(function (line, i) {
      // A variant drawn beside its whole version is a breakdown: its own colour, dashed.
      var breakdown = !!line.variant && series.lines.some(function (l) { return l.side === line.side && !l.variant; });
      var colour = breakdown ? variantPalette[breakdowns++ % variantPalette.length] : sideColour[line.side];
      var group = "line-" + i;
      // The band is the area between an invisible lower line and the upper line (fill: "-1").
      datasets.push({ label: line.label + " low", group: group, band: true, data: line.low, borderWidth: 0,
        pointRadius: 0, fill: false, spanGaps: true });
      datasets.push({ label: line.label + " high", group: group, band: true, data: line.high, borderWidth: 0,
        pointRadius: 0, fill: "-1", backgroundColor: translucent(colour, breakdown ? 0.08 : 0.18), spanGaps: true });
      datasets.push({ label: line.label, group: group, data: line.rate, n: line.n, borderColor: colour,
        backgroundColor: colour, borderWidth: 2, pointRadius: 2, tension: 0.2, spanGaps: true,
        borderDash: breakdown ? [5, 4] : [] });
      // Six bands at once are unreadable: a version's variants wait behind their legend entries.
      if (breakdown) datasets.slice(-3).forEach(function (dataset) { dataset.hidden = true; });
    });
    new window.Chart(canvas, {
      type: "line",
      data: { labels: labels, datasets: datasets },
      options: {
        animation: false,
        maintainAspectRatio: false,
        interaction: { mode: "index", intersect: false },
        scales: { y: { min: 0, max: 1, ticks: { callback: function (v) { return pct(v); } } } },
        plugins: {
          legend: {
            position: "bottom",
            labels: { filter: function (item, chart) { return !chart.datasets[item.datasetIndex].band; } },
            // Hide a line together with its band.
            onClick: function (event, item, legend) {
              var chart = legend.chart, group = chart.data.datasets[item.datasetIndex].group;
              var hide = chart.isDatasetVisible(item.datasetIndex);
              chart.data.datasets.forEach(function (dataset, index) {
                if (dataset.group === group) chart.setDatasetVisibility(index, !hide);
              });
              chart.update();
            },
          },
          tooltip: {
            filter: function (item) { return !item.dataset.band && item.parsed.y !== null; },
            callbacks: { label: function (ctx) {
              var i = ctx.datasetIndex, d = ctx.chart.data.datasets;
              var low = d[i - 2].data[ctx.dataIndex], high = d[i - 1].data[ctx.dataIndex];
              return ctx.dataset.label + ": " + pct(ctx.parsed.y) + " [" + pct(low) + ", " + pct(high) + "] of " + ctx.dataset.n[ctx.dataIndex];
            } },
          },
        },
      },
    });
  }

  drawDifferences();
  drawSeries();
})();
