// Draws the overview charts from the JSON the page carries (no inline script).
(function () {
  const data = JSON.parse(document.getElementById("chart-data").textContent);
  const palette = ["#2b5fd9", "#d9822b", "#1e8449", "#8e44ad", "#c0392b", "#16a085", "#7f8c8d", "#b7950b"];
  const colour = (i) => palette[i % palette.length];
  const axisDays = data.days.map((d) => d.slice(5));

  function draw(id, key, options) {
    const canvas = document.getElementById(id);
    if (!canvas || !window.Chart) return;
    new window.Chart(canvas, {
      type: "line",
      data: {
        labels: axisDays,
        datasets: data.series.map((s, i) => ({
          label: s.label,
          data: s[key],
          borderColor: colour(i),
          backgroundColor: colour(i),
          // A gap is a day without data: left open, not bridged (volume is
          // None outside a version's live days). No smoothing: it overshoots.
          spanGaps: false,
          tension: 0,
          pointRadius: 0,
          borderWidth: 2,
        })),
      },
      options: Object.assign({ animation: false, interaction: { mode: "index", intersect: false },
        plugins: { legend: { position: "bottom" } } }, options),
    });
  }

  draw("down-rate-chart", "down_rate", {
    scales: { y: { min: 0, max: 1, ticks: { callback: (v) => Math.round(v * 100) + "%" } } },
    plugins: { legend: { position: "bottom" }, tooltip: { callbacks: {
      label: (ctx) => `${ctx.dataset.label}: ${ctx.parsed.y === null ? "–" : Math.round(ctx.parsed.y * 100) + "%"}` } } },
  });
  draw("volume-chart", "volume", { scales: { y: { beginAtZero: true } } });
})();
