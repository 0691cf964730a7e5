// The comparison page's chart: milestones reached against step, one step line per arm (report/plot.py's series).
// The tables are plain HTML; this only draws window.MCU_COMPARISON (comparison-data.js).
(function () {
  'use strict';
  const C = window.MCU_COMPARISON;
  const gd = document.getElementById('milestone-chart');
  if (!C.series.length) {
    gd.textContent = 'no arm has run yet: nothing to draw';
    window.VIEWER_READY = true;
    return;
  }
  const traces = C.series.map(s => ({
    type: 'scatter', mode: 'lines+markers', name: s.arm, x: s.steps, y: s.reached, line: { shape: 'hv', width: 2 },
  }));
  const layout = {
    title: { text: C.title.split('\n').join('<br>'), font: { size: 13 } },
    margin: { l: 60, r: 10, t: 70, b: 50 },
    xaxis: { title: { text: 'step' } },
    yaxis: { title: { text: 'milestones reached' }, rangemode: 'tozero', dtick: 1 },
    legend: { orientation: 'h', y: -0.2 },
  };
  Plotly.newPlot(gd, traces, layout, { displayModeBar: false, responsive: true }).then(() => {
    window.VIEWER_READY = true;
    window.READY_AT = performance.now();
  });
})();
