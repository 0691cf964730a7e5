// The comparison page's charts: first the score, a point per seed (joined across arms) with each arm's mean and
// its interval; milestones reached against step, per arm the median over its seeds with the IQR
// as a band (report/plot.py's series); across 2 tasks or more each arm's performance profile with its band; and per
// milestone (chosen in a list) each arm's Kaplan–Meier curve.
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
  function drawScores() {  // the primary result: a point per seed, the same seed joined, the mean with its interval
    const columns = C.scores || [];
    const dots = [];
    const bySeed = {};
    columns.forEach((column, index) => column.seeds.forEach((seed, i) => {
      (bySeed[seed] = bySeed[seed] || []).push([index, column.scores[i]]);
    }));
    Object.entries(bySeed).forEach(([seed, points]) => {
      if (points.length > 1) {
        dots.push({ type: 'scatter', mode: 'lines', x: points.map(p => p[0]), y: points.map(p => p[1]),
                    line: { color: '#c8c8c8', width: 1 }, name: `seed ${seed}`, showlegend: false, hoverinfo: 'name' });
      }
    });
    columns.forEach((column, index) => {
      const line = colour(index);
      dots.push({ type: 'scatter', mode: 'markers', x: column.scores.map(() => index), y: column.scores,
                  text: column.seeds.map(seed => `seed ${seed}`), marker: { color: line, size: 8 },
                  name: column.arm, showlegend: false, hovertemplate: '%{text}: %{y}<extra>' + column.arm + '</extra>' });
      if (column.mean !== null) {
        const interval = column.low !== null ? { type: 'data', symmetric: false, array: [column.high - column.mean],
                                                 arrayminus: [column.mean - column.low], color: line } : undefined;
        dots.push({ type: 'scatter', mode: 'markers', x: [index + 0.2], y: [column.mean], error_y: interval,
                    marker: { color: line, symbol: 'diamond', size: 9 }, name: `${column.arm} mean`, showlegend: false });
      }
    });
    return Plotly.newPlot(document.getElementById('score-chart'), dots, {
      margin: { l: 50, r: 10, t: 10, b: 40 },
      xaxis: { tickvals: columns.map((_, index) => index), ticktext: columns.map(column => column.arm), zeroline: false,
               range: [-0.5, columns.length - 0.5] },
      yaxis: { title: { text: 'score' }, range: C.max_score ? [-0.05 * C.max_score, C.max_score * 1.05] : undefined },
    }, { displayModeBar: false, responsive: true });
  }
  function drawProfiles() {  // across tasks: per arm the share of normalised scores above τ, its bootstrap band
    const target = document.getElementById('profile-chart');
    if (!target || !(C.profiles || []).length) { return Promise.resolve(); }
    const curves = [];
    C.profiles.forEach((p, index) => {
      const line = colour(index);
      if (p.low !== null && p.high !== null) {
        curves.push({ type: 'scatter', mode: 'lines', x: p.thresholds, y: p.high,
                      line: { shape: 'hv', width: 0, color: line }, showlegend: false, hoverinfo: 'skip' });
        curves.push({ type: 'scatter', mode: 'lines', x: p.thresholds, y: p.low,
                      line: { shape: 'hv', width: 0, color: line }, fill: 'tonexty',
                      fillcolor: translucent(line, 0.2), showlegend: false, hoverinfo: 'skip' });
      }
      curves.push({ type: 'scatter', mode: 'lines', name: p.arm, x: p.thresholds, y: p.share,
                    line: { shape: 'hv', width: 2, color: line } });
    });
    return Plotly.newPlot(target, curves, {
      title: { text: `performance profile over ${C.profile_title} (95% stratified bootstrap band)`, font: { size: 12 } },
      margin: { l: 60, r: 10, t: 40, b: 50 }, xaxis: { title: { text: 'normalised score τ' }, range: [0, 1] },
      yaxis: { title: { text: 'share of scores > τ' }, range: [0, 1.02] }, legend: { orientation: 'h', y: -0.2 },
    }, { displayModeBar: false, responsive: true });
  }
  Promise.all([Plotly.newPlot(gd, traces, layout, { displayModeBar: false, responsive: true }), drawSurvival(),
               drawScores(), drawProfiles()])
    .then(() => {
      window.VIEWER_READY = true;
      window.READY_AT = performance.now();
    });
})();
