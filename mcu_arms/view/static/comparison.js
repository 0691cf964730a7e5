// The comparison page's charts: milestones reached against step, per arm the median over its seeds with the IQR
// as a band (report/plot.py's series); and per milestone (chosen in a list) each arm's Kaplan–Meier curve.
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
  // Each arm keeps one colour: its line and, translucent, its band (plotly would give the band traces colours of
  // their own, so a band would read as another arm's).
  const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22',
                   '#17becf'];
  const colour = index => PALETTE[index % PALETTE.length];
  const translucent = (hex, alpha) => `rgba(${[1, 3, 5].map(i => parseInt(hex.slice(i, i + 2), 16)).join(', ')}, ${alpha})`;
  const traces = [];
  C.series.forEach((s, index) => {
    const line = colour(index);
    if (s.replicates > 1) {  // the interquartile band across seeds, under the median line
      traces.push({ type: 'scatter', mode: 'lines', x: s.steps, y: s.high, line: { shape: 'hv', width: 0, color: line },
                    showlegend: false, hoverinfo: 'skip' });
      traces.push({ type: 'scatter', mode: 'lines', x: s.steps, y: s.low, line: { shape: 'hv', width: 0, color: line },
                    fill: 'tonexty', fillcolor: translucent(line, 0.25), showlegend: false, hoverinfo: 'skip' });
    }
    traces.push({ type: 'scatter', mode: 'lines+markers', name: `${s.label} (n=${s.replicates})`, x: s.steps,
                  y: s.median, line: { shape: 'hv', width: 2, color: line }, marker: { color: line } });
  });
  const layout = {
    title: { text: C.title.split('\n').join('<br>'), font: { size: 13 } },
    margin: { l: 60, r: 10, t: 70, b: 50 },
    xaxis: { title: { text: 'step' } },
    yaxis: { title: { text: 'milestones reached (median)' }, rangemode: 'tozero', dtick: 1 },
    legend: { orientation: 'h', y: -0.2 },
  };
  const km = document.getElementById('km-chart');
  const choice = document.getElementById('km-milestone');
  const keys = Object.keys(C.survival || {});
  keys.forEach(key => choice.add(new Option(key.split('/').slice(1).join('/'), key)));
  function drawSurvival() {  // each arm's Kaplan–Meier curve of reaching the chosen milestone, its band beneath
    if (!keys.length) { km.textContent = 'no arm ran several episodes: no curve to draw'; return Promise.resolve(); }
    const curves = [];
    C.survival[choice.value].forEach((c, index) => {
      const line = colour(index);
      curves.push({ type: 'scatter', mode: 'lines', x: c.steps, y: c.high, line: { shape: 'hv', width: 0, color: line },
                    showlegend: false, hoverinfo: 'skip' });
      curves.push({ type: 'scatter', mode: 'lines', x: c.steps, y: c.low, line: { shape: 'hv', width: 0, color: line },
                    fill: 'tonexty', fillcolor: translucent(line, 0.2), showlegend: false, hoverinfo: 'skip' });
      curves.push({ type: 'scatter', mode: 'lines', name: `${c.arm} (n=${c.n}, median ${c.median ?? 'not reached'})`,
                    x: c.steps, y: c.reached, line: { shape: 'hv', width: 2, color: line } });
    });
    return Plotly.react(km, curves, {
      margin: { l: 60, r: 10, t: 20, b: 50 }, xaxis: { title: { text: 'step' } },
      yaxis: { title: { text: 'share of episodes that reached it' }, range: [0, 1.02] },
      legend: { orientation: 'h', y: -0.2 },
    }, { displayModeBar: false, responsive: true });
  }
  choice.addEventListener('change', drawSurvival);
  Promise.all([Plotly.newPlot(gd, traces, layout, { displayModeBar: false, responsive: true }), drawSurvival()])
    .then(() => {
      window.VIEWER_READY = true;
      window.READY_AT = performance.now();
    });
})();
