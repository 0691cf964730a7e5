// The episode page: per-step timelines (plotly.js), a frame player, and the step and the agent's turn at it, all
// kept on one current step. Data: window.MCU_EPISODE (data.js); step details, turns and the agent's files are
// classic scripts added when first needed. No fetch(), modules or workers: browsers refuse them under file://.
//
// Plotly pitfalls met here: two clicks within ~300 ms anywhere on a plot are a double click that resets the axes
// (so doubleClick is off, and 'reset zoom' is a button); plotly_click only fires near a point unless
// hoverdistance is -1, and then the nearest point can be far from the click, so the step is taken from the click's
// pixel through the public axis range (gd.layout.xaxis.range follows zoom), never from private axis mappers.
(function () {
  'use strict';
  const E = window.MCU_EPISODE;
  const $ = id => document.getElementById(id);
  const img = $('frame'), scrub = $('scrub'), gd = $('timeline');
  const frameSteps = [];
  E.frames.ranges.forEach(([a, b]) => { for (let s = a; s <= b; s++) frameSteps.push(s); });
  const turns = E.turns.slice().sort((a, b) => a.step - b.step || a.turn - b.turn);
  const state = { step: null, frameStep: null, turn: null, playing: false, timer: null, requested: new Set() };
  const scripts = {};

  const pad = (n, width) => String(n).padStart(width, '0');
  const frameUrl = step => 'frames/' + pad(step, 6) + '.png';
  const clamp = step => Math.max(E.first_step, Math.min(E.last_step, Math.round(step)));

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    Object.entries(attrs || {}).forEach(([k, v]) => { if (k === 'class') node.className = v; else node.setAttribute(k, v); });
    children.flat().forEach(c => node.append(c instanceof Node ? c : document.createTextNode(String(c))));
    return node;
  }

  // index of the last element of sorted `values` that is <= target (by `key`), or -1
  function lastAtOrBefore(values, target, key) {
    let lo = 0, hi = values.length - 1, found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if ((key ? key(values[mid]) : values[mid]) <= target) { found = mid; lo = mid + 1; } else hi = mid - 1;
    }
    return found;
  }

  function loadScript(src) {  // a data script, once; resolves when it has run
    if (!scripts[src]) {
      scripts[src] = new Promise((resolve, reject) => {
        const node = el('script', { src });
        node.onload = resolve;
        node.onerror = () => reject(new Error('could not load ' + src));
        document.head.append(node);
      });
    }
    return scripts[src];
  }

  function frameFor(step) {  // the frame of `step`, else the nearest earlier one
    if (!frameSteps.length) return null;
    const i = lastAtOrBefore(frameSteps, step);
    return frameSteps[i < 0 ? 0 : i];
  }

  // ---- the step ---------------------------------------------------------------------------------------------
  function row(label, value, cls) {
    return el('tr', cls ? { class: cls } : {}, el('th', {}, label), el('td', {}, value));
  }
  function pre(text) { return el('pre', {}, text); }

  function renderStep(d) {
    const box = $('step-detail');
    const rows = [
      row('step', d.step),
      row('applied', Object.keys(d.applied).length ? JSON.stringify(d.applied) : 'nothing (all keys at rest)'),
      row('agent ms', d.agent_ms.toFixed(1)),
      row('sim ms', d.sim_ms.toFixed(2)),
    ];
    if (d.noop_cause) rows.push(row('noop', d.noop_cause + (d.reason ? ': ' + d.reason : ''), 'bad'));
    if (d.dropped_keys.length) rows.push(row('dropped keys', d.dropped_keys.join(', '), 'warn'));
    if (d.adjustments.length) rows.push(row('adjusted', d.adjustments.join('; '), 'warn'));
    if (d.no_effect.length) rows.push(row('no effect', d.no_effect.join(', '), 'warn'));
    if (d.reward) rows.push(row('reward', d.reward));
    if (d.events.length) rows.push(row('reached', d.events.join(', '), 'good'));
    const info = Object.entries(d.info).map(([k, v]) => k + ' ' + (typeof v === 'object' ? JSON.stringify(v) : v));
    if (info.length) rows.push(row('state', info.join(' · ')));
    const reply = el('details', {}, el('summary', {}, 'reply as received'),
                     pre(d.received === null ? '(no reply arrived)' : d.received));
    box.replaceChildren(el('h2', {}, 'step ' + d.step), el('table', {}, el('tbody', {}, rows)), reply);
    box.dataset.step = d.step;
  }

  function showStep(step) {
    const chunk = Math.floor(step / E.chunk_size);
    loadScript('steps-' + pad(chunk, 4) + '.js').then(() => {
      if (state.step !== step) return;  // moved on meanwhile
      const d = (window.MCU_STEPS[chunk] || []).find(r => r.step === step);
      if (d) renderStep(d);
      else $('step-detail').replaceChildren(el('p', { class: 'muted' }, 'step ' + step + ' is not in the step log'));
    }, err => $('step-detail').replaceChildren(el('p', { class: 'bad' }, err.message)));
  }

  // ---- the agent's turn at the step -------------------------------------------------------------------------
  function renderTurnDetail(box, d) {
    const parts = [];
    if (d.frame) parts.push(el('img', { class: 'turn-frame', src: 'turn-frames/step_' + d.step + '.png',
                                         width: 128, height: 128, alt: 'the frame attached to this turn' }));
    parts.push(el('details', { open: '' }, el('summary', {}, 'answer'),
                  pre(d.answer.length ? d.answer.join('\n\n') : '(no message)')));
    parts.push(el('details', { open: '' }, el('summary', {}, 'actions.json'),
                  pre(d.actions === null ? '(none written)' : d.actions)));
    parts.push(el('details', {}, el('summary', {}, 'prompt'), pre(d.prompt === null ? '(missing)' : d.prompt)));
    if (d.stderr_tail) parts.push(el('details', {}, el('summary', {}, 'stderr (end)'), pre(d.stderr_tail)));
    box.append(...parts);
    box.dataset.loaded = d.turn;
  }

  function showTurn(step) {
    if (!E.takes_turns || !turns.length) return;
    const box = $('turn');
    const i = lastAtOrBefore(turns, step, t => t.step);
    const t = i < 0 ? null : turns[i];
    if ((t && t.turn) === state.turn) return;
    state.turn = t && t.turn;
    if (!t) {
      box.replaceChildren(el('p', { class: 'muted' }, 'no model turn before this step'));
      delete box.dataset.turn;
      return;
    }
    const ok = t.outcome === 'ok';
    box.replaceChildren(
      el('h2', {}, 'turn ' + t.turn + ' (taken at step ' + t.step + ')'),
      el('table', {}, el('tbody', {},
        row('outcome', t.outcome + (t.rc !== null ? ' (rc ' + t.rc + ')' : ''), ok ? 'good' : 'bad'),
        ...(t.reason ? [row('failure', t.reason, 'bad')] : []),
        row('latency', t.latency_s.toFixed(1) + ' s'),
        row('payload', (t.payload_bytes / 1e6).toFixed(2) + ' MB'),
        row('session', t.session + (t.resumed ? ' (resumed)' : ' (new)')),
        row('actions planned', t.actions_queued))));
    box.dataset.turn = t.turn;
    delete box.dataset.loaded;
    loadScript('turns/turn-' + pad(t.turn, 4) + '.js').then(() => {
      if (state.turn === t.turn) renderTurnDetail(box, window.MCU_TURNS[t.turn]);
    }, err => box.append(el('p', { class: 'bad' }, err.message)));
  }

  // ---- seeking and playing ----------------------------------------------------------------------------------
  let cursorPending = false;
  function moveCursor() {  // at most once per animation frame, however fast the scrubber moves
    if (cursorPending || !window.VIEWER_READY) return;
    cursorPending = true;
    requestAnimationFrame(() => {
      cursorPending = false;
      Plotly.relayout(gd, { 'shapes[0].x0': state.step, 'shapes[0].x1': state.step });
    });
  }

  function seek(step, opts) {
    step = clamp(step);
    state.step = step;
    scrub.value = step;
    $('step').textContent = step;
    if (img) {
      const f = frameFor(step);
      if (f !== state.frameStep) {
        state.frameStep = f;
        state.requested.add(frameUrl(f));
        img.src = frameUrl(f);
      }
      $('frame-step').textContent = f === step ? String(f) : f + ' (nearest earlier)';
    }
    if (!(opts && opts.noHash)) history.replaceState(null, '', '#step=' + step);
    showStep(step);
    showTurn(step);
    moveCursor();
  }

  function prefetch(step) {  // frames load lazily: the one shown, plus a few ahead while playing
    const f = frameFor(step);
    if (f === null || state.requested.has(frameUrl(f))) return;
    state.requested.add(frameUrl(f));
    new Image().src = frameUrl(f);
  }

  function play() {
    if (state.playing) return;
    state.playing = true;
    $('play').textContent = 'pause';
    state.timer = setInterval(() => {
      if (state.step >= E.last_step) return pause();
      seek(state.step + 1);
      for (let k = 1; k <= 3; k++) prefetch(Math.min(E.last_step, state.step + k));
    }, 1000 / Number($('fps').value));
  }
  function pause() {
    state.playing = false;
    $('play').textContent = 'play';
    clearInterval(state.timer);
    state.timer = null;
  }

  // ---- timelines ----------------------------------------------------------------------------------------------
  // A series keeps its colour on every page (by its name, not by the order of the series a page happens to have).
  const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22',
                   '#17becf'];
  const colourOf = name => PALETTE[[...name].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7) % PALETTE.length];
  const stepLine = (name, s) => ({ name, x: s.x, y: s.y, mode: 'lines',
                                   line: { shape: s.encoding === 'change_points' ? 'hv' : 'linear', width: 1.3,
                                           color: colourOf(name) } });
  const rows = [];
  const linesOf = series => Object.entries(series).map(([name, s]) => stepLine(name, s));
  if (Object.keys(E.vitals).length) rows.push({ title: 'vitals', traces: linesOf(E.vitals), axis: { rangemode: 'tozero' } });
  if (Object.keys(E.inventory).length) rows.push({ title: 'items', traces: linesOf(E.inventory), axis: { rangemode: 'tozero' } });
  const marks = (name, x, label, marker, text) => ({ name, x, y: x.map(() => label), mode: 'markers', marker,
                                                     text, hoverinfo: 'x+text+name' });
  const events = [
    // an invisible point at each end: a click anywhere on the row has a nearest point, so it always lands
    { name: 'steps', x: [E.first_step, E.last_step], y: [' ', ' '], mode: 'markers',
      marker: { opacity: 0 }, hoverinfo: 'none', showlegend: false },
  ];
  const reached = E.milestones.filter(m => m.step !== null);
  if (reached.length) {  // each star labelled with the milestone it marks
    const stars = marks('milestone', reached.map(m => m.step), 'milestone', { symbol: 'star', size: 11, color: '#2a8' },
                        reached.map(m => m.identity));
    events.push({ ...stars, mode: 'markers+text', textposition: 'top center', textfont: { size: 9, color: '#2a8' } });
  }
  if (E.deaths.x.length) events.push(marks('death', E.deaths.x, 'death', { symbol: 'x', size: 9, color: '#c00' }));
  if (E.no_effect.x.length) {
    events.push(marks('no effect', E.no_effect.x, 'no effect', { symbol: 'line-ns-open', size: 8, color: '#a60' }));
  }
  Object.entries(E.noops).forEach(([cause, ev]) => {
    const label = 'noop: ' + cause + (E.noop_kinds[cause] === 'infrastructure' ? ' (infra)' : '');
    const text = ev.counts ? ev.counts.map(c => c + ' noops from here') : undefined;
    events.push(marks(label, ev.x, label, { symbol: 'line-ns-open', size: 10 }, text));
  });
  if (turns.length) {
    const turnText = t => 'turn ' + t.turn + ': ' + t.outcome + ', ' + t.latency_s.toFixed(1) + ' s';
    events.push(marks('turn', turns.map(t => t.step), 'turn',
                      { symbol: 'triangle-up', size: 8, color: turns.map(t => (t.outcome === 'ok' ? '#36c' : '#c00')) },
                      turns.map(turnText)));
  }
  rows.push({ title: 'events', traces: events, axis: { type: 'category' } });
  if (E.reward.y.some(v => v)) rows.push({ title: 'reward', traces: [stepLine('reward', E.reward)] });
  rows.push({ title: 'latency ms', axis: { type: 'log', dtick: 1 },  // ticks at powers of ten only
              traces: [stepLine('agent ms', E.latency.agent_ms), stepLine('sim ms', E.latency.sim_ms)] });

  const gap = 0.04, span = (1 - gap * (rows.length - 1)) / rows.length;
  const layout = {
    margin: { l: 150, r: 10, t: 30, b: 40 }, hovermode: 'x', showlegend: true,
    hoverdistance: -1,  // no cutoff: a click anywhere on a row has a nearest point, so plotly_click always fires
    legend: { orientation: 'h', y: 1, yanchor: 'bottom' },
    xaxis: { range: [E.first_step, E.last_step], anchor: 'y' + rows.length, title: { text: 'step' } },
    shapes: [{ type: 'line', xref: 'x', yref: 'paper', x0: E.first_step, x1: E.first_step, y0: 0, y1: 1,
               line: { color: 'red', width: 1 } }],
  };
  const traces = [];
  rows.forEach((r, i) => {
    const axis = i === 0 ? 'yaxis' : 'yaxis' + (i + 1);
    const top = 1 - i * (span + gap);
    layout[axis] = { domain: [Math.max(0, top - span), top], title: { text: r.title }, fixedrange: true, ...r.axis };
    r.traces.forEach(t => traces.push({ type: 'scatter', ...t, yaxis: 'y' + (i + 1) }));
  });
  gd.style.height = (150 * rows.length + 90) + 'px';

  function plotBox() { return gd.querySelector('.nsewdrag').getBoundingClientRect(); }
  function stepAtClientX(clientX) {
    const box = plotBox(), [r0, r1] = gd.layout.xaxis.range;
    return r0 + (clientX - box.left) / box.width * (r1 - r0);
  }
  function clientXOfStep(step) {
    const box = plotBox(), [r0, r1] = gd.layout.xaxis.range;
    return box.left + (step - r0) / (r1 - r0) * box.width;
  }

  // ---- controls -----------------------------------------------------------------------------------------------
  scrub.addEventListener('input', () => { pause(); seek(Number(scrub.value)); });
  $('play').addEventListener('click', () => (state.playing ? pause() : play()));
  $('prev').addEventListener('click', () => { pause(); seek(state.step - 1); });
  $('next').addEventListener('click', () => { pause(); seek(state.step + 1); });
  $('fps').addEventListener('change', () => { if (state.playing) { pause(); play(); } });
  $('reset').addEventListener('click', () => Plotly.relayout(gd, { 'xaxis.range': [E.first_step, E.last_step] }));
  document.querySelectorAll('a.jump').forEach(a => a.addEventListener('click', ev => {
    ev.preventDefault(); pause(); seek(Number(a.dataset.step));
  }));
  document.addEventListener('keydown', ev => {
    if (ev.target === scrub || ev.target.tagName === 'SELECT') return;  // the range input steps by itself
    if (ev.key === 'ArrowLeft') { ev.preventDefault(); $('prev').click(); }
    if (ev.key === 'ArrowRight') { ev.preventDefault(); $('next').click(); }
    if (ev.key === ' ') { ev.preventDefault(); $('play').click(); }
  });
  const showFiles = $('show-files');
  if (showFiles) showFiles.addEventListener('click', () => loadScript('agent-files.js').then(() => {
    $('file-texts').replaceChildren(...window.MCU_AGENT_FILES.map(f => el('details', { open: '' },
      el('summary', {}, f.name + ' (' + f.bytes + ' bytes' + (f.cut ? ', cut' : '') + ')'), pre(f.text))));
    showFiles.disabled = true;
  }));

  const linked = /step=(\d+)/.exec(location.hash);
  seek(linked ? Number(linked[1]) : E.first_step, { noHash: true });

  Plotly.newPlot(gd, traces, layout, { displayModeBar: false, responsive: true, doubleClick: false }).then(() => {
    gd.on('plotly_click', ev => {
      let x = ev.event ? stepAtClientX(ev.event.clientX) : NaN;
      if (!Number.isFinite(x)) x = ev.points[0].x;
      pause();
      seek(x);
    });
    window.VIEWER_READY = true;
    window.READY_AT = performance.now();
    moveCursor();
  });

  // A large step log opened for the first time: the server indexes it while this page shows its first steps. It is
  // asked again every second; once the log is indexed the page is drawn anew from the whole of it.
  function awaitIndex(attempt) {
    loadScript('data.js?indexed=' + attempt).then(() => {
      if (window.MCU_EPISODE.indexing) setTimeout(() => awaitIndex(attempt + 1), 1000);
      else location.reload();
    }, () => {});
  }
  if ($('indexing')) awaitIndex(1);

  window.viewer = {
    seek, play, pause, frameFor, stepAtClientX, clientXOfStep,
    points: () => Object.fromEntries(gd.data.map(t => [t.name, t.x.length])),
    state: () => ({ step: state.step, frameStep: state.frameStep, turn: state.turn, playing: state.playing,
                    src: img ? img.getAttribute('src') : null, requested: state.requested.size }),
  };
})();
