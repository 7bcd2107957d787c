/* The book's figures follow the reader's theme and screen; a few accessibility repairs of the
   theme's markup. Loaded (deferred) on every page of the static site; it loads plotly.js on those with figures.

   * Dark mode (pydata-sphinx-theme's data-theme="dark" on <html>): every plotly figure is
     drawn with a transparent paper and plot area, light text, dim grid lines and dark legend
     and control backgrounds. Saturated colours (data, colour scales) stay as they are; greys
     (text, axes, black lines) are mirrored in lightness. Switching the theme redraws the
     figures from their original specification (Plotly.react), so switching back is exact.
   * Narrow screens (a plot under 600 px wide): smaller fonts and margins, the legend as one
     horizontal block under the plot, and titles or subplot titles that still run into each
     other broken over two lines, measured after drawing.
   * Static sliders: a step that swaps a precomputed frame (Plotly.animate) becomes one
     Plotly.update that leaves the figure as the frame would, computed once instead of twice;
     where the frames only move and restyle points or bars and change heatmaps' values, a
     quicker step redraws only the traces that change (window.mlbookStep).
   * Accessibility: a scrollable output gets tabindex=0 and a name (keyboard users can scroll
     it); buttons whose aria-label hides their visible text lose the aria-label; the citation
     list's deprecated doc-biblioentry role becomes listitem. */
(function () {
  "use strict";
  const NARROW_PX = 600;
  const DARK = {text: "#ced6dd", grid: "#3a4250", back: "#1f242b", paper: "rgba(0,0,0,0)"};

  // ---- colours -------------------------------------------------------------------------
  const probe = document.createElement("span");
  const cache = new Map();
  function rgba(c) {  // any CSS colour -> [r, g, b, a] (null if not a colour)
    if (typeof c !== "string") return null;
    if (cache.has(c)) return cache.get(c);
    let out = null;
    probe.style.color = "";
    probe.style.color = c;
    if (probe.style.color) {
      document.body.appendChild(probe);
      const m = getComputedStyle(probe).color.match(/rgba?\(([^)]+)\)/);
      probe.remove();
      if (m) {
        const p = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
        out = [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
      }
    }
    cache.set(c, out);
    return out;
  }
  function hsl([r, g, b]) {
    r /= 255; g /= 255; b /= 255;
    const mx = Math.max(r, g, b), mn = Math.min(r, g, b), l = (mx + mn) / 2;
    const s = mx === mn ? 0 : (l > 0.5 ? (mx - mn) / (2 - mx - mn) : (mx - mn) / (mx + mn));
    return [s, l];
  }
  const css = ([r, g, b, a]) => `rgba(${Math.round(r)},${Math.round(g)},${Math.round(b)},${a})`;

  // A colour for dark mode, by the role its key gives it.
  function darkColour(key, parentKey, value) {
    const c = rgba(value);
    if (!c) return value;
    const [s, l] = hsl(c);
    if (key === "paper_bgcolor" || key === "plot_bgcolor" || key === "bgcolor" && parentKey === "scene") {
      return l > 0.6 ? DARK.paper : value;
    }
    if (/bgcolor$/.test(key) || parentKey === "fill" || key === "fillcolor" && s < 0.15 && l > 0.8) {
      return l > 0.6 ? css([31, 36, 43, c[3]]) : value;  // legend, buttons, slider rail, table cells
    }
    if (/^(grid|zeroline|line|border|tick)color$/.test(key) && l > 0.75) return css([58, 66, 80, c[3]]);
    if (s < 0.5 && l < 0.45) {  // dark greys and slate text: mirror the lightness
      const k = (1 - l) / Math.max(l, 0.02);
      const lift = v => 255 - (255 - v) / Math.max(k, 1);
      const out = c.slice(0, 3).map(lift);
      const target = Math.max(0.75, 1 - l);
      const [, l2] = hsl(out);
      const scale = l2 > 0 ? target / l2 : 1;
      return css([...out.map(v => Math.min(255, v * scale)), c[3]]);
    }
    return value;
  }

  function darken(node, parentKey) {  // a deep copy with dark-mode colours
    if (Array.isArray(node)) {
      if (parentKey === "colorscale" || parentKey === "colorway") return node;
      const colours = /colou?r$/.test(parentKey || "");
      return node.map(v => (typeof v === "string" ? (colours ? darkColour(parentKey, null, v) : v) : darken(v, parentKey)));
    }
    if (node && typeof node === "object") {
      const out = {};
      for (const [k, v] of Object.entries(node)) {
        if (k === "colorscale" || k === "colorway" || k === "z" || k === "x" || k === "y" || k === "customdata") out[k] = v;
        else if (typeof v === "string" && /colou?r$/.test(k)) out[k] = darkColour(k, parentKey, v);
        else if (Array.isArray(v) && /colou?r$/.test(k)) out[k] = v.map(c => (typeof c === "string" ? darkColour(k, parentKey, c) : c));
        else out[k] = darken(v, k);
      }
      return out;
    }
    return node;
  }

  // ---- narrow screens ------------------------------------------------------------------
  function narrowLayout(layout) {
    const L = Object.assign({}, layout);
    const font = Object.assign({}, L.font || {});
    font.size = Math.min(font.size || 12, 10);
    L.font = font;
    const m = Object.assign({}, L.margin || {});
    m.l = Math.min(m.l === undefined ? 80 : m.l, 48);
    // a slider's last tick label is centred on the plot's right edge: room for half of it
    m.r = Math.min(m.r === undefined ? 80 : m.r, (L.sliders && L.sliders.length) ? 28 : 12);
    L.margin = m;
    if (L.title) {
      const t = typeof L.title === "string" ? {text: L.title} : Object.assign({}, L.title);
      t.font = Object.assign({}, t.font || {}, {size: Math.min((t.font && t.font.size) || 17, 13)});
      // at the top of the figure: fit() moves everything else down if it runs into it
      Object.assign(t, {yref: "container", y: 1, yanchor: "top", pad: Object.assign({}, t.pad || {}, {t: 6})});
      L.title = t;
    }
    if (Array.isArray(L.annotations)) {
      L.annotations = L.annotations.map(a => Object.assign({}, a, {font: Object.assign({}, a.font || {}, {size: Math.min((a.font && a.font.size) || 12, 10)})}));
    }
    for (const k of Object.keys(L)) {
      if (/^[xy]axis\d*$/.test(k) && L[k] && typeof L[k] === "object") {
        const ax = Object.assign({}, L[k]);
        if (ax.title) {
          const t = typeof ax.title === "string" ? {text: ax.title} : Object.assign({}, ax.title);
          t.font = Object.assign({}, t.font || {}, {size: Math.min((t.font && t.font.size) || 12, 10)});
          ax.title = t;
        }
        // a log axis labels its 2s and 5s at 3/4 of the tick font: 11 px keeps them at 8 px
        ax.tickfont = Object.assign({}, ax.tickfont || {}, {size: ax.type === "log" ? 11 : Math.min((ax.tickfont && ax.tickfont.size) || 12, 9)});
        L[k] = ax;
      }
    }
    if (L.showlegend !== false) {
      // One horizontal block at the bottom of the figure, under the slider and axis titles
      // that hang below the plot area; fit() makes the figure taller by the legend's height.
      L.legend = Object.assign({}, L.legend || {}, {orientation: "h", x: 0, xanchor: "left", xref: "container",
        y: 0, yanchor: "bottom", yref: "container", font: Object.assign({}, (L.legend && L.legend.font) || {}, {size: 9})});
    }
    if (Array.isArray(L.sliders)) {
      L.sliders = L.sliders.map(sl => Object.assign({}, sl, {font: Object.assign({}, sl.font || {}, {size: 9}),
        currentvalue: Object.assign({}, sl.currentvalue || {}, {font: Object.assign({}, (sl.currentvalue && sl.currentvalue.font) || {}, {size: 10})})}));
    }
    if (Array.isArray(L.updatemenus)) {
      // a row of buttons is wider than a phone: one dropdown each
      L.updatemenus = L.updatemenus.map(m => Object.assign({}, m, {type: "dropdown", direction: "down",
        font: Object.assign({}, m.font || {}, {size: 9})}));
    }
    return L;
  }

  // Panels side by side (one row of subplots) stacked into one column on a phone: each panel
  // gets the full width and its share of a taller figure; subplot titles and other annotations
  // placed in paper coordinates over a panel move with it, and so do heatmap colour bars.
  function stackPanels(L, data, frames) {
    const xs = Object.keys(L).filter(k => /^xaxis\d*$/.test(k) && L[k] && Array.isArray(L[k].domain));
    if (xs.length < 2 || xs.length > 4) return null;
    const yOf = k => {  // the y axis a panel's x axis sits on (no anchor: the y axis of the same number)
      const a = L[k].anchor === undefined ? k.replace("xaxis", "y") : L[k].anchor;
      return a && a !== "free" ? a.replace("y", "yaxis") : null;
    };
    const ys = xs.map(yOf);
    if (ys.some(y => !y || !L[y] || L[y].overlaying)) return null;
    const dom = y => (Array.isArray(L[y].domain) ? L[y].domain : [0, 1]);
    const y0 = dom(ys[0]);
    if (ys.some(y => Math.abs(dom(y)[0] - y0[0]) > 1e-6 || Math.abs(dom(y)[1] - y0[1]) > 1e-6)) return null;
    const order = xs.map((k, i) => [k, ys[i]]).sort((p, q) => L[p[0]].domain[0] - L[q[0]].domain[0]);
    for (let i = 1; i < order.length; i++) if (L[order[i][0]].domain[0] < L[order[i - 1][0]].domain[1] - 1e-6) return null;
    const n = order.length, gap = 0.16 / n * 2;
    const old = {}, slot = {};
    order.forEach(([xk, yk], i) => {
      old[xk] = L[xk].domain.slice();
      const top = 1 - i / n - (i ? gap / 2 : 0), bottom = 1 - (i + 1) / n + (i < n - 1 ? gap / 2 : 0);
      slot[xk] = [bottom, top];
      L[xk] = Object.assign({}, L[xk], {domain: [0, 1]});
      L[yk] = Object.assign({}, L[yk], {domain: [bottom, top]});
    });
    const move = a => {  // an annotation in paper coordinates over a panel follows it
      if (!a || (a.xref || "paper") !== "paper" || (a.yref || "paper") !== "paper" || typeof a.x !== "number") return a;
      const xk = order.map(o => o[0]).find(k => a.x >= old[k][0] - 0.02 && a.x <= old[k][1] + 0.02);
      if (!xk) return a;
      const [d0, d1] = old[xk], [s0, s1] = slot[xk];
      const y = typeof a.y === "number" ? s0 + (a.y - y0[0]) / (y0[1] - y0[0]) * (s1 - s0) : a.y;
      return Object.assign({}, a, {x: (a.x - d0) / (d1 - d0), y});
    };
    if (Array.isArray(L.annotations)) L.annotations = L.annotations.map(move);
    for (const f of frames || []) if (f.layout && Array.isArray(f.layout.annotations)) f.layout.annotations = f.layout.annotations.map(move);
    const bar = t => {
      const xk = (t.xaxis || "x").replace("x", "xaxis");
      if (!slot[xk] || !["heatmap", "contour", "histogram2d"].includes(t.type)) return t;
      const [s0, s1] = slot[xk];
      return Object.assign({}, t, {colorbar: Object.assign({}, t.colorbar || {}, {y: (s0 + s1) / 2, yanchor: "middle", len: (s1 - s0) * 0.95, x: 1.02})});
    };
    for (let i = 0; i < data.length; i++) data[i] = bar(data[i]);
    for (const f of frames || []) {  // a frame that sets its own colour bar gets the same place
      if (!Array.isArray(f.data)) continue;
      f.data = f.data.map((t, j) => {
        const base = data[f.traces ? f.traces[j] : j] || {};
        if (!t || !t.colorbar) return t;
        return Object.assign({}, t, {colorbar: bar(Object.assign({type: base.type, xaxis: base.xaxis}, t)).colorbar});
      });
    }
    L.height = Math.round((L.height || 450) * (n === 2 ? 1.6 : 0.8 * n));
    return L;
  }

  // After drawing: break overlapping titles and subplot titles over two lines.
  function breakText(text) {  // the longest line of a title broken at its middle space
    if (typeof text !== "string") return null;
    const lines = text.split(/<br\s*\/?>/i);
    let at = 0;
    lines.forEach((l, i) => { if (l.replace(/<[^>]+>/g, "").length > lines[at].replace(/<[^>]+>/g, "").length) at = i; });
    const words = lines[at].split(" ");
    if (words.length < 2) return null;
    let best = 1, bestDiff = Infinity;
    for (let i = 1; i < words.length; i++) {
      const d = Math.abs(words.slice(0, i).join(" ").length - words.slice(i).join(" ").length);
      if (d < bestDiff) { bestDiff = d; best = i; }
    }
    lines[at] = words.slice(0, best).join(" ") + "<br>" + words.slice(best).join(" ");
    return lines.join("<br>");
  }
  const hit = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1 && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
  function shrink(font, box, svg) {  // a font size at which the box no longer runs off the figure's sides
    const size = (font && font.size) || 12;
    const over = Math.max(0, box.right - svg.right) + Math.max(0, svg.left - box.left);
    return Math.max(8, Math.min(size - 1, Math.floor(size * (box.width - over - 4) / box.width)));
  }
  // After a narrow draw: the legend gets room of its own at the bottom; a title or subplot
  // title that runs into other text or off the figure is broken over two lines, or made smaller.
  function fit(gd, pass, compacted) {
    const P = window.Plotly, upd = {}, fl = gd._fullLayout;
    if (!fl || pass > 3) return null;
    if (pass === 0) refitOnChange(gd);
    const svg = gd.querySelector(".main-svg").getBoundingClientRect();
    const inside = b => b.left >= svg.left - 1 && b.right <= svg.right + 1;
    const texts = Array.from(gd.querySelectorAll(".legendtext, .g-gtitle text, [class*='title'] text, .annotation-text, "
      + ".slider-label, .slider-current-value, .updatemenu-item-text"));
    const against = (el) => {  // the texts el runs into
      const b = el.getBoundingClientRect();
      return texts.filter(o => !el.contains(o) && !o.contains(el) && !el.parentNode.contains(o) && hit(b, o.getBoundingClientRect()));
    };
    let grow = 0, growTop = 0;
    const legend = gd.querySelector(".legend");
    if (pass === 0 && legend && fl.showlegend) grow += Math.ceil(legend.getBoundingClientRect().height) + 10;
    if (legend && fl.showlegend && pass > 0) {  // still in the way of something: more room below
      for (const t of legend.querySelectorAll(".legendtext")) {
        for (const o of against(t)) grow = Math.max(grow, Math.ceil(o.getBoundingClientRect().bottom - t.getBoundingClientRect().top) + 6);
      }
    }
    // legend entries wider than the figure: two lines
    for (const t of gd.querySelectorAll(".legendtext")) {
      if (inside(t.getBoundingClientRect())) continue;
      const d = t.closest(".traces") && t.closest(".traces").__data__;
      const tr = d && d[0] && d[0].trace;
      const name = tr && breakText(tr.name);
      if (tr && name && tr.index !== undefined) { (upd._names = upd._names || []).push([tr.index, name]); }
    }
    const anns = gd.layout.annotations || [];
    Array.from(gd.querySelectorAll(".annotation")).forEach((el, i) => {
      const idx = el.hasAttribute("data-index") ? Number(el.getAttribute("data-index")) : i;
      const a = anns[idx], tx = el.querySelector(".annotation-text");
      if (!a || !tx || (inside(tx.getBoundingClientRect()) && !against(tx).length)) return;
      const t = pass < 2 && breakText(a.text);
      if (t) upd[`annotations[${idx}].text`] = t;
      else upd[`annotations[${idx}].font.size`] = Math.max(8, ((a.font && a.font.size) || 10) - 2);
    });
    const titleEl = gd.querySelector(".g-gtitle text");
    if (titleEl) {
      const title = gd.layout.title, text = typeof title === "string" ? title : title && title.text;
      const tb = titleEl.getBoundingClientRect();
      // plotly lifts a title of several lines hung from the top by part of a line: pad it down
      if (tb.top < svg.top) upd["title.pad.t"] = ((fl.title.pad && fl.title.pad.t) || 0) + Math.ceil(svg.top - tb.top) + 2;
      if (!inside(tb)) {
        const t = pass < 2 && breakText(text);
        if (t) { upd["title.text"] = t; growTop += 16; }
        else upd["title.font.size"] = shrink(title && title.font, tb, svg);
      } else {
        for (const o of against(titleEl)) growTop = Math.max(growTop, Math.ceil(tb.bottom - o.getBoundingClientRect().top) + 6);
      }
    }
    for (const k of Object.keys(fl)) {  // axis titles wider than the figure: two lines
      if (!/^xaxis\d*$/.test(k)) continue;
      const el = gd.querySelector(`.g-${k.replace("axis", "")}title text`);
      const ax = gd.layout[k] || {}, text = ax.title && (typeof ax.title === "string" ? ax.title : ax.title.text);
      if (!el || inside(el.getBoundingClientRect())) continue;
      const t = pass < 2 && breakText(text);
      if (t) { upd[`${k}.title.text`] = t; grow += 14; }
      else upd[`${k}.title.font.size`] = 8;
    }
    // A slider under text that hangs below the plot (a long axis title) moves down; a menu
    // above the plot in the way of a note moves up over it. The figure grows by as much.
    const own = (el, sel) => { const g = el.closest(sel), d = g && g.__data__; return d && (Array.isArray(d) ? d[0] : d); };
    const sliderDown = {}, menuUp = {};
    for (const t of gd.querySelectorAll(".slider-label, .slider-current-value")) {
      const s = own(t, ".slider-group"), b = t.getBoundingClientRect();
      if (!s || s._index === undefined) continue;
      for (const o of against(t)) {
        const ob = o.getBoundingClientRect();
        if (o.closest(".slider-group") || o.closest(".legend") || ob.top >= b.top) continue;
        sliderDown[s._index] = Math.max(sliderDown[s._index] || 0, Math.ceil(ob.bottom - b.top) + 4);
      }
    }
    for (const g of gd.querySelectorAll(".updatemenu-header-group")) {  // the button's box, not only its text
      const m = own(g, ".updatemenu-header-group"), box = g.getBoundingClientRect();
      if (!m || m._index === undefined || !(m.y >= 1)) continue;
      for (const o of against(g)) {
        if (o.closest(".updatemenu-container") || o.closest(".g-gtitle")) continue;  // the title: margin.t grows below
        menuUp[m._index] = Math.max(menuUp[m._index] || 0, Math.ceil(box.bottom - o.getBoundingClientRect().top) + 4);
      }
    }
    for (const [i, d] of Object.entries(sliderDown)) {
      upd[`sliders[${i}].pad.t`] = ((fl.sliders[i].pad && fl.sliders[i].pad.t) || 0) + d;
      grow += d;
    }
    for (const [i, d] of Object.entries(menuUp)) {
      upd[`updatemenus[${i}].y`] = fl.updatemenus[i].y + d / fl._size.h;
      growTop += d;
    }
    if (grow) { upd["margin.b"] = fl.margin.b + grow; }
    if (growTop) { upd["margin.t"] = fl.margin.t + growTop; }
    if (grow || growTop) upd.height = fl.height + grow + growTop;
    const names = upd._names;
    delete upd._names;
    if (!Object.keys(upd).length && !names) {  // nothing in the way: once, take out the empty bands
      const cut = compacted ? null : compact(gd);
      return cut ? P.relayout(gd, cut).then(() => fit(gd, pass + 1, true)) : null;
    }
    let step = Object.keys(upd).length ? P.relayout(gd, upd) : Promise.resolve();
    if (names) step = step.then(() => P.restyle(gd, {name: names.map(n => n[1])}, names.map(n => n[0])));
    return step.then(() => fit(gd, pass + 1, compacted));
  }
  // A slider step or a menu button can rewrite the layout (a frame's title, a button's title,
  // written for the desktop): once it has drawn, the figure is fitted again (without the first
  // pass's room for the legend, which it has).
  function refitOnChange(gd) {
    if (!gd.on || !gd.removeListener) return;
    if (!gd._mlbookRefit) {
      let timer = null, busy = false, again = false;
      const run = () => {  // one fitting at a time; a change during it fits once more after it
        if (busy) { again = true; return; }
        if (!gd._fullLayout || (gd.clientWidth || window.innerWidth) >= NARROW_PX) return;
        busy = true;
        Promise.resolve(fit(gd, 1)).catch(() => null).then(() => { busy = false; if (again) { again = false; run(); } });
      };
      gd._mlbookRefit = () => { clearTimeout(timer); timer = setTimeout(run, 150); };
    }
    for (const ev of ["plotly_animated", "plotly_sliderchange", "plotly_buttonclicked"]) {
      gd.removeListener(ev, gd._mlbookRefit);  // once, also after a redraw that kept the listeners
      gd.on(ev, gd._mlbookRefit);
    }
  }
  // The empty bands a desktop layout leaves on a phone: between the title and what is under it
  // (the desktop's top margin), and between the plot (with its axis titles and slider) and the
  // legend or the bottom (the desktop's bottom margin plus the legend's room). Each shrinks to a
  // small gap, the figure by as much; a margin plotly widened for something (automargin) stays.
  function compact(gd) {
    const fl = gd._fullLayout, svg = gd.querySelector(".main-svg").getBoundingClientRect();
    const title = gd.querySelector(".g-gtitle text"), legend = fl.showlegend ? gd.querySelector(".legend") : null;
    let top = svg.top + fl._size.t, bottom = svg.top + fl._size.t + fl._size.h;  // the plot area, then all but title and legend
    for (const e of gd.querySelectorAll("text, .annotation, .updatemenu-header-group, .slider-group, .colorbar, .shapelayer path, .imagelayer image")) {
      if ((title && (e === title || e.closest(".g-gtitle"))) || (legend && legend.contains(e)) || e.closest(".updatemenu-container")) continue;
      const b = e.getBoundingClientRect();
      if (b.width < 1 || b.height < 1) continue;
      top = Math.min(top, b.top); bottom = Math.max(bottom, b.bottom);
    }
    const cut = {};
    let menusTop = Infinity;  // a menu above the plot comes down to just above what is under it
    for (const g of gd.querySelectorAll(".updatemenu-header-group")) {
      const m = g.__data__ && (Array.isArray(g.__data__) ? g.__data__[0] : g.__data__), b = g.getBoundingClientRect();
      if (!m || m._index === undefined || b.height < 1) continue;
      const room = top - 10 - b.bottom;
      if (m.y >= 1 && room > 8) cut[`updatemenus[${m._index}].y`] = m.y - room / fl._size.h;
      menusTop = Math.min(menusTop, m.y >= 1 && room > 8 ? b.top + room : b.top);
      bottom = Math.max(bottom, b.bottom);
    }
    top = Math.min(top, menusTop);
    const roomTop = top - (title ? title.getBoundingClientRect().bottom : svg.top) - 10;
    if (roomTop > 8 && fl._size.t <= fl.margin.t + 0.5) cut["margin.t"] = fl.margin.t - Math.floor(roomTop);
    const roomBottom = (legend ? legend.getBoundingClientRect().top - 10 : svg.bottom - 6) - bottom;
    if (roomBottom > 8 && fl._size.b <= fl.margin.b + 0.5) cut["margin.b"] = fl.margin.b - Math.floor(roomBottom);
    if (!Object.keys(cut).length) return null;
    cut.height = fl.height - (fl.margin.t - (cut["margin.t"] ?? fl.margin.t)) - (fl.margin.b - (cut["margin.b"] ?? fl.margin.b));
    return cut;
  }

  // ---- slider steps --------------------------------------------------------------------
  // A slider made by grid_slider swaps precomputed frames with Plotly.animate (no transition,
  // redraw): plotly then computes the figure twice per step, once to prepare the transition
  // (defaults, calc) and once in the redraw that follows it. On the site each such step becomes
  // one Plotly.update carrying the frame's traces and layout as attribute paths, which plotly
  // merges into the figure as animate merges a frame: the same figure after the step, computed
  // once (1.05 to 3 times faster, about 1.5 typically: tools/bench_static_sliders.py). The frames
  // stay in the figure.
  const leaf = v => v === null || typeof v !== "object" || Array.isArray(v) || "bdata" in v;
  function paths(obj, prefix, out) {  // {a: {b: 1}} -> {"a.b": 1}: arrays and typed arrays are values
    for (const [k, v] of Object.entries(obj)) {
      const p = prefix ? `${prefix}.${k}` : k;
      if (leaf(v) || !Object.keys(v).length) out[p] = v;
      else paths(v, p, out);
    }
    return out;
  }
  // animate never autoranges an axis (plotly holds autorange off while it transitions, the redraw
  // included): an axis keeps the range of the first drawing. An update would autorange again, so
  // each step turns autorange off on the axes that have it, keeping the range they have.
  function axesHeld(layout, data) {
    const names = new Set(Object.keys(layout).filter(k => /^[xy]axis\d*$/.test(k)));
    for (const t of data || []) {
      for (const d of ["x", "y"]) names.add(`${d}axis${((t && t[`${d}axis`]) || d).slice(1)}`);
    }
    const held = {};
    for (const k of names) {
      const ax = layout[k] || {};
      if (ax.autorange !== false && !(Array.isArray(ax.range) && ax.autorange === undefined)) held[`${k}.autorange`] = false;
    }
    return held;
  }
  function frameStep(step, frames, held, base) {
    const a = step && step.method === "animate" && Array.isArray(step.args) ? step.args : null;
    const names = a && Array.isArray(a[0]) && a[0].length === 1 ? a[0] : null, opts = (a && a[1]) || {};
    const f = names && frames.get(String(names[0]));
    if (!f || (opts.transition && opts.transition.duration) || (opts.frame && opts.frame.duration)) return step;
    const data = Array.isArray(f.data) ? f.data : [];
    const traces = Array.isArray(f.traces) ? f.traces : data.map((_, i) => i);
    const each = data.map(t => paths(t || {}, "", {}));
    const upd = {};
    for (const p of new Set(each.flatMap(Object.keys))) {
      // restyling a trace's type or orientation resets its axes, even to the same value: left out
      // where the frame keeps them (undefined in an update leaves an attribute as it is)
      const vals = each.map(t => (p in t ? t[p] : undefined));
      if ((p === "type" || p === "orientation") && vals.every((v, i) => v === undefined || v === ((base[traces[i]] || {})[p]))) continue;
      upd[p] = vals;
    }
    const lay = Object.assign({}, held, paths(f.layout || {}, "", {}));
    return Object.assign({}, step, {method: "update", args: [upd, lay, traces]});
  }
  // Quicker still, where a step only moves and restyles points or bars and changes heatmaps'
  // values: when every trace is a scatter, a bar or a heatmap with a fixed colour range, and the
  // frames differ from one another only in the traces' points (x, y, numbers: a category axis
  // would need its ticks again; text points keep their number), error bars, texts, hover, names
  // and styles, the heatmaps' values, texts and hover, plus the figure's title, a step is plotly's animate
  // without its closing redraw (redraw: false), given only the traces that change from frame to
  // frame: plotly recomputes the traces and draws those again, styles included, and leaves the
  // axes (which keep their ranges, as under animate) and the rest; then one relayout draws the
  // frame's title and, where names or styles change, the legend (bars and error bars, which the
  // transition draws without part of their style, are styled again by plotly's styling of their type;
  // heatmaps, which it does not draw, are drawn after it: drawHeatmaps below). Such a
  // step is a "skip" step for plotly, which moves the slider and tells mlbook.js
  // (plotly_sliderchange), and mlbook.js applies it: `window.mlbookStep`, which the tests and
  // benchmarks call too (tests/test_slider_steps.py: the same figure as plotly's own step).
  const QUICK_DATA = new Set(["x", "y", "text", "hovertext", "hovertemplate", "hoverinfo", "customdata",
    "textposition", "error_x.array", "error_x.arrayminus", "error_y.array", "error_y.arrayminus"]);
  const QUICK_TYPES = new Set(["scatter", "bar", "heatmap"]);
  // a heatmap whose colour range is fixed and whose frames change only its values, texts and hover
  const QUICK_HEAT = new Set(["z", "text", "customdata", "hovertemplate", "hovertext"]);
  const QUICK_LEGEND = new Set(["name", "line.color", "line.width", "line.dash", "marker.color", "marker.size",
    "marker.symbol", "marker.line.color", "marker.line.width", "textfont.color", "textfont.size", "fillcolor", "opacity"]);
  const QUICK_LAYOUT = /^title\./;
  // The attribute paths that some frame sets to a value other than the figure's: a path no frame
  // sets stays as it is under both steps (animate leaves it; so does the quick step).
  function varying(base, frames) {
    const b = paths(base || {}, "", {}), each = frames.map(o => paths(o || {}, "", {})), out = new Set();
    for (const p of new Set(each.flatMap(Object.keys))) {
      const was = JSON.stringify(b[p]);
      if (each.some(e => p in e && JSON.stringify(e[p]) !== was)) out.add(p);
    }
    return out;
  }
  const ITEM_BYTES = {i1: 1, u1: 1, i2: 2, u2: 2, i4: 4, u4: 4, f4: 4, f8: 8};
  function count(v) {  // the number of values of an array, or of plotly's typed array {dtype, bdata, shape}
    if (Array.isArray(v)) return v.length;
    if (!v || typeof v !== "object" || !("bdata" in v)) return v === undefined ? "-" : "scalar";
    if (v.shape) return String(v.shape);
    const b64 = String(v.bdata), pad = b64.endsWith("==") ? 2 : b64.endsWith("=") ? 1 : 0;
    return (b64.length * 3 / 4 - pad) / (ITEM_BYTES[v.dtype] || 1);
  }
  const frameTraces = f => (Array.isArray(f.traces) ? f.traces : (f.data || []).map((_, i) => i));
  function movingTraces(layout, data, frames) {  // the traces the frames change, if every step can be quick; else null
    if (!(data || []).length || !data.every(t => QUICK_TYPES.has(t.type || "scatter"))) return null;
    for (const p of varying(layout, frames.map(f => f.layout || {}))) if (!QUICK_LAYOUT.test(p)) return null;
    const moving = [], restyled = new Set(), heat = [];
    let legend = false;
    for (let i = 0; i < data.length; i++) {
      const mine = frames.map(f => (f.data || [])[frameTraces(f).indexOf(i)]);
      if (mine.every(t => t === undefined)) continue;
      if (mine.some(t => t === undefined)) return null;  // in some frames only: not a simple swap
      // text points that appear or go are left behind by plotly's transition: those need a redraw
      const texts = [data[i], ...mine].some(t => /text/.test(t.mode || ""));
      if (texts && new Set([data[i], ...mine].map(t => `${count(t.x)} ${count(t.y)} ${count(t.text)}`)).size > 1) return null;
      const changed = varying(data[i], mine);
      if (data[i].type === "heatmap") {
        const fixed = [data[i], ...mine].every(t => typeof t.zmin === "number" && typeof t.zmax === "number");
        if (!fixed || !["zmin", "zmax"].every(k => [data[i], ...mine].every(t => t[k] === data[i][k]))) return null;
        for (const p of changed) if (!QUICK_HEAT.has(p)) return null;
        if (changed.size) heat.push(i);
        continue;
      }
      // a trace kept out of the legend (in every frame) or a figure without one needs no legend redrawn
      const listed = layout.showlegend !== false && [data[i], ...mine].some(t => t.showlegend !== false);
      for (const p of changed) {
        if (QUICK_LEGEND.has(p)) legend = legend || listed;
        else if (!QUICK_DATA.has(p)) return null;
      }
      // coordinates that are strings (categories, dates) would change the axis: not quick
      if (["x", "y"].some(d => changed.has(d) && [data[i], ...mine].some(t => Array.isArray(t[d]) && t[d].some(v => typeof v === "string")))) return null;
      if (changed.size) moving.push(i);
      // bars and error bars a transition draws anew come without part of their style (a bar's
      // outline, an error bar's colour): they are styled again after it
      if ((data[i].type === "bar") || [data[i], ...mine].some(t => ["error_x", "error_y"].some(e => t[e] && t[e].visible !== false))) restyled.add(i);
    }
    // plotly puts the traces it draws in its data order among their subplot's traces: with a
    // trace that stays between two that move, the stacking order would change. So a subplot's
    // moving traces come with every trace between them, and with all its traces where one is
    // filled to the next (the fill is drawn from both).
    const subplot = t => `${t.xaxis || "x"}${t.yaxis || "y"}`, traces = new Set(moving);
    for (const key of new Set(moving.map(i => subplot(data[i])))) {
      const mine = data.map((t, i) => i).filter(i => subplot(data[i]) === key && data[i].type !== "heatmap");
      const at = mine.filter(i => traces.has(i));
      const tonext = mine.some(i => /^tonext/.test(data[i].fill || ""));
      for (const i of mine) if (tonext || (i > at[0] && i < at[at.length - 1])) traces.add(i);
    }
    const sorted = Array.from(traces).sort((a, b) => a - b);
    return {traces: sorted, legend, restyled: sorted.filter(i => restyled.has(i)), heat};
  }
  function quickStep(step, frames, moving) {
    const a = step && step.method === "animate" && Array.isArray(step.args) ? step.args : null;
    const names = a && Array.isArray(a[0]) && a[0].length === 1 ? a[0] : null, opts = (a && a[1]) || {};
    const f = names && frames.get(String(names[0]));
    if (!f || (opts.transition && opts.transition.duration) || (opts.frame && opts.frame.duration)) return null;
    const title = Object.fromEntries(Object.entries(paths(f.layout || {}, "", {})).filter(([k]) => QUICK_LAYOUT.test(k)));
    const of = i => f.data[frameTraces(f).indexOf(i)];
    const part = {data: moving.traces.map(of), traces: moving.traces.slice()};
    const heat = {data: moving.heat.map(of), traces: moving.heat.slice()};
    return Object.assign({}, step, {method: "skip", args: ["mlbook-quick", part, title, moving.legend, moving.restyled, heat]});
  }
  const QUICK_OPTS = {mode: "immediate", frame: {duration: 0, redraw: false}, transition: {duration: 0}};
  function setPath(obj, path, v) {  // obj.a.b = v for "a.b", containers made as needed
    const keys = path.split(".");
    let o = obj;
    for (const k of keys.slice(0, -1)) o = (o[k] && typeof o[k] === "object") ? o[k] : (o[k] = {});
    o[keys[keys.length - 1]] = v;
  }
  // Plotly's transition draws only trace types it can animate, and leaves a subplot's heatmap layer
  // out: the heatmaps of each subplot whose values changed are drawn again from the new calcdata
  // with plotly's own heatmap drawing (its trace module), in their layer (made again if the
  // transition took it away). Where these internals are not there (another plotly.js), the figure
  // is drawn again whole, which is slower but the same.
  function drawHeatmaps(gd, traces) {
    const fl = gd._fullLayout, ids = new Map();
    for (const t of traces) {
      const tr = (gd._fullData || [])[t];
      if (tr) ids.set(`${tr.xaxis}${tr.yaxis}`, tr._module);
    }
    for (const [id, mod] of ids) {
      const pi = fl && fl._plots && fl._plots[id];
      if (!pi || !pi.plot || !mod || typeof mod.plot !== "function") return window.Plotly.react(gd, gd.data, gd.layout);
      const cds = (gd.calcdata || []).filter(cd => cd && cd[0] && cd[0].trace && cd[0].trace.type === "heatmap" &&
        cd[0].trace.visible === true && `${cd[0].trace.xaxis}${cd[0].trace.yaxis}` === id);
      let layer = pi.plot.select(".heatmaplayer");
      if (layer.empty()) layer = pi.plot.insert("g", ":first-child").classed("heatmaplayer mlayer", true).datum({className: "heatmaplayer"});
      mod.plot(gd, pi, cds, layer);
      if (typeof mod.style === "function") mod.style(gd);
    }
    return gd;
  }
  // A frame's title that differs from the one drawn only in its words (the same tags, so the same
  // lines, superscripts and bold) is written into the text plotly drew: its text nodes, in order
  // (less the empty ones and the zero-width spaces plotly puts around a superscript), are the
  // title's words between the tags.
  // This is what a relayout of the title would draw, without the relayout: it computes the
  // figure's defaults again and restyles the whole layout, about 10 to 20 ms of a 40 to 60 ms
  // quick step. Anything else (maths, a title that grows the margin, other tags, a text drawn
  // otherwise than expected) returns false, and the caller relayouts.
  const decode = html => new DOMParser().parseFromString(`<p>${html}</p>`, "text/html").body.textContent;
  const parts = text => String(text).split(/(<[^>]*>)/);  // words at even indices, tags at odd
  function swapTitle(gd, text) {
    const fl = gd._fullLayout, el = gd.querySelector(".g-gtitle text.gtitle"), lt = gd.layout.title;
    const old = fl && fl.title && fl.title.text;
    if (!el || !lt || typeof lt !== "object" || typeof old !== "string" || typeof text !== "string") return false;
    if (fl.title.automargin || /\$/.test(old + text) || el.getAttribute("data-unformatted") !== old) return false;
    const a = parts(old), b = parts(text);
    if (a.length !== b.length || a.some((t, k) => k % 2 === 1 && t !== b[k])) return false;
    if (a.some((t, k) => k % 2 === 0 && !t !== !b[k])) return false;  // a word may not come or go
    const nodes = [], walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) if (n.nodeValue && n.nodeValue !== "\u200b") nodes.push(n);
    const words = a.filter((t, k) => k % 2 === 0 && t).map(decode), next = b.filter((t, k) => k % 2 === 0 && t).map(decode);
    if (nodes.length !== words.length || nodes.some((n, k) => n.nodeValue !== words[k])) return false;
    nodes.forEach((n, k) => { n.nodeValue = next[k]; });
    el.setAttribute("data-unformatted", text);
    lt.text = text;
    fl.title.text = text;
    return true;
  }
  // the title paths of a quick step that differ from the figure's; {} where the title was swapped in
  function titleChange(gd, title) {
    const now = paths(gd.layout.title && typeof gd.layout.title === "object" ? {title: gd.layout.title} : {}, "", {});
    const diff = Object.fromEntries(Object.entries(title).filter(([k, v]) => JSON.stringify(now[k]) !== JSON.stringify(v)));
    const keys = Object.keys(diff);
    return keys.length === 1 && keys[0] === "title.text" && swapTitle(gd, diff["title.text"]) ? {} : diff;
  }
  // Step `i` of slider `s` as a click on it applies it.
  window.mlbookStep = (gd, i, s = 0) => {
    const st = gd.layout.sliders[s].steps[i], P = window.Plotly;
    if (st.method === "skip" && Array.isArray(st.args) && st.args[0] === "mlbook-quick") {
      const [, part, title, legend, restyled = [], heat = {data: [], traces: []}] = st.args;
      // a heatmap's new values go into the figure's data first: the animate then computes every
      // trace again (it draws only the scatters and bars), and the heatmaps are drawn after it
      heat.traces.forEach((t, j) => { for (const [p, v] of Object.entries(paths(heat.data[j] || {}, "", {}))) setPath(gd.data[t], p, v); });
      // any legend attribute set (to the value it has) has plotly draw the legend again; the title
      // is written in after the traces are drawn (swapTitle), or laid out with the legend
      const relayout = () => {
        const t = titleChange(gd, title), lay = legend ? Object.assign({showlegend: gd._fullLayout.showlegend}, t) : t;
        return Object.keys(lay).length ? P.relayout(gd, lay) : gd;
      };
      // plotly's own styling of those traces' types (their trace modules: scatter and bar style their
      // error bars too); without it (another plotly.js), a restyle of a style attribute to the value
      // it has (null: unset, as it is), which styles every trace again at the cost of a new
      // supplyDefaults
      const restyle = () => {
        const mods = new Set(restyled.map(i => ((gd._fullData || [])[i] || {})._module));
        if (Array.from(mods).every(m => m && typeof m.style === "function")) {
          mods.forEach(m => m.style(gd));
          return gd;
        }
        return P.restyle(gd, {opacity: restyled.map(i => (gd.data[i].opacity !== undefined ? gd.data[i].opacity : null))}, restyled);
      };
      return ((part.traces.length || heat.traces.length) ? P.animate(gd, part, QUICK_OPTS) : Promise.resolve(gd))
        .then(() => (heat.traces.length ? drawHeatmaps(gd, heat.traces) : gd))
        .then(() => (restyled.length ? restyle() : gd))
        .then(relayout);
    }
    return st.method === "skip" ? Promise.resolve(gd) : P[st.method](gd, ...(st.args || []));
  };
  function listen(gd) {  // after every drawing: newPlot drops a figure's listeners
    if (!gd.on || !gd.removeListener) return;
    if (!gd._mlbookQuick) {
      gd._mlbookQuick = ev => {  // plotly calls a listener with its event emitter as `this`, not gd
        const sl = ev && ev.slider, st = ev && ev.step;
        if (sl && st && Array.isArray(st.args) && st.args[0] === "mlbook-quick") window.mlbookStep(gd, st._index, sl._index);
      };
    }
    gd.removeListener("plotly_sliderchange", gd._mlbookQuick);
    gd.on("plotly_sliderchange", gd._mlbookQuick);
  }
  function stepsAsUpdates(layout, data, frames) {
    if (!Array.isArray(layout.sliders) || !Array.isArray(frames) || !frames.length) return layout;
    const byName = new Map(frames.filter(f => f && f.name !== undefined).map(f => [String(f.name), f]));
    const held = axesHeld(layout, data), moving = movingTraces(layout, data || [], frames);
    const sliders = layout.sliders.map(sl => (sl && Array.isArray(sl.steps)
      ? Object.assign({}, sl, {steps: sl.steps.map(st => (moving && quickStep(st, byName, moving)) || frameStep(st, byName, held, data || []))})
      : sl));
    return Object.assign({}, layout, {sliders});
  }

  // ---- drawing -------------------------------------------------------------------------
  const isDark = () => document.documentElement.dataset.theme === "dark";
  const isNarrow = gd => (gd.clientWidth || window.innerWidth) < NARROW_PX;
  const clone = o => (o === undefined ? o : JSON.parse(JSON.stringify(o)));

  function adapted(gd, narrow = isNarrow(gd)) {
    const spec = gd._mlbookSpec;
    let data = spec.data, layout = spec.layout, frames = spec.frames;
    const dark = isDark();
    if (dark) {
      data = darken(data, "data"); layout = darken(layout, "layout"); frames = darken(frames, "frames");
      // text without a colour of its own takes plotly's dark default: give the figure light text
      if (!(layout.font && layout.font.color)) layout.font = Object.assign({}, layout.font || {}, {color: "#d0d7de"});
      // plotly draws an active or hovered menu button near-white whatever the theme: the
      // pickers stay light chips with dark text.
      if (Array.isArray(layout.updatemenus)) {
        layout.updatemenus = layout.updatemenus.map(m => Object.assign({}, m, {bgcolor: "#e6e9ee", bordercolor: "#8b949e",
          font: Object.assign({}, m.font || {}, {color: "#1f2328"})}));
      }
    }
    if (narrow) {
      layout = narrowLayout(layout);
      data = clone(data); frames = clone(frames);
      stackPanels(layout, data, frames);
    }
    gd._mlbookState = `${dark}|${narrow}`;
    return {data: clone(data), layout: clone(layout), frames: clone(frames)};
  }

  // Figures being drawn (and fitted to a narrow screen) or redrawn for a new theme or width:
  // window.mlbookRedrawing() tells a test when all are done, instead of it waiting a fixed time.
  let redrawing = 0;
  window.mlbookRedrawing = () => redrawing;
  let drawAfresh = null;  // plotly's own newPlot, not the hook below

  function hook(P) {
    if (!P || P._mlbookHooked) return;
    P._mlbookHooked = true;
    const newPlot = P.newPlot;
    drawAfresh = (gd, spec) => newPlot.call(P, gd, spec);
    P.newPlot = function (gd, spec, ...rest) {
      const el = typeof gd === "string" ? document.getElementById(gd) : gd;
      if (el && el.classList && el.classList.contains("mlbook-plotly") && spec && spec.data && !rest.length) {
        el._mlbookSpec = {data: clone(spec.data), layout: clone(spec.layout || {}), frames: clone(spec.frames || []),
                          config: spec.config};
        // light and wide: the figure as written (plotly may fill in the objects it is given,
        // so the kept copy is a separate clone); otherwise an adapted copy
        // the width is read once (reading it lays the page out)
        const narrow = isNarrow(el), plain = !isDark() && !narrow;
        if (plain) el._mlbookState = "false|false";
        const a = Object.assign({data: spec.data, layout: spec.layout || {}, frames: spec.frames}, plain ? {} : adapted(el, narrow));
        a.layout = stepsAsUpdates(a.layout, a.data, a.frames);
        redrawing++;
        return newPlot.call(this, el, Object.assign({}, spec, a)).then(g => { listen(el); return narrow ? fit(el, 0) || g : g; })
          .finally(() => { redrawing--; });
      }
      return newPlot.call(this, gd, spec, ...rest);
    };
  }

  function restyleAll() {
    for (const gd of document.querySelectorAll(".mlbook-plotly")) {
      if (!gd._mlbookSpec || !gd._fullLayout) continue;
      const narrow = isNarrow(gd), want = `${isDark()}|${narrow}`, was = gd._mlbookState || "";
      if (was === want) continue;
      const a = adapted(gd, narrow);
      const spec = {data: a.data, layout: stepsAsUpdates(a.layout, a.data, a.frames), frames: a.frames, config: gd._mlbookSpec.config};
      // A new width moves panels (stackPanels). Plotly.react cannot move an axis drawn with
      // constrain: "domain": it puts back the domain of the last drawing (_inputDomain), and the
      // stacked panels then overlap. So a figure whose width class changed is drawn afresh.
      const widthChanged = was.split("|")[1] !== String(narrow);
      redrawing++;
      (widthChanged && drawAfresh ? drawAfresh(gd, spec) : window.Plotly.react(gd, spec))
        .then(() => { listen(gd); return narrow ? fit(gd, 0) : null; })
        .finally(() => { redrawing--; });
    }
  }

  // ---- accessibility repairs -----------------------------------------------------------
  function names() {
    // The switch's icons carry titles ("Light", "Dark") that axe reads as visible text the
    // button's name ("Color mode") lacks; the icons are decoration, the name says it all.
    for (const e of document.querySelectorAll(".theme-switch-button svg")) {
      if (e.getAttribute("aria-hidden") === "true" && !e.querySelector("title")) continue;
      e.setAttribute("aria-hidden", "true");
      e.removeAttribute("aria-labelledby");
      e.removeAttribute("role");
      for (const t of e.querySelectorAll("title")) t.remove();
    }
    // innerText (the visible text) lays the page out: asked only where the whole text is not in
    // the name already, and all read before any name is removed (one layout, not one per button)
    const norm = t => (t || "").replace(/\s+/g, " ").trim().toLowerCase();
    const named = Array.from(document.querySelectorAll("button[aria-label], summary[aria-label], a[aria-label]"))
      .filter(e => norm(e.textContent) && !norm(e.getAttribute("aria-label")).includes(norm(e.textContent)));
    const seen = named.map(e => norm(e.innerText));
    named.forEach((e, i) => { if (seen[i] && !norm(e.getAttribute("aria-label")).includes(seen[i])) e.removeAttribute("aria-label"); });
  }
  function repair() {
    for (const e of document.querySelectorAll('[role="doc-biblioentry"]')) e.setAttribute("role", "listitem");
    names();
    scrollables();
    // Font Awesome swaps the theme switch's icons in late: repair their names again then.
    for (const b of document.querySelectorAll(".theme-switch-button, .search-button-field")) {
      if (b._mlbookWatched) continue;
      b._mlbookWatched = true;
      new MutationObserver(names).observe(b, {childList: true, subtree: true, attributes: true, attributeFilter: ["aria-label"]});
    }
  }
  function scrollables() {
    const sel = ".cell_output .output, .cell_output pre, .output pre, div.highlight pre, .table-wrapper, .pst-scrollable-table-container, pre";
    for (const e of document.querySelectorAll(sel)) {
      if (e.hasAttribute("tabindex")) continue;
      const st = getComputedStyle(e);
      const scrolls = (/(auto|scroll)/.test(st.overflowX) && e.scrollWidth > e.clientWidth + 1)
        || (/(auto|scroll)/.test(st.overflowY) && e.scrollHeight > e.clientHeight + 1);
      if (!scrolls || e.querySelector("a[href], button, input, select, textarea, [tabindex]")) continue;
      e.setAttribute("tabindex", "0");
      if (!e.hasAttribute("role")) e.setAttribute("role", "region");
      if (!e.hasAttribute("aria-label")) e.setAttribute("aria-label", e.closest(".cell_output") ? "Cell output (scrollable)" : "Code (scrollable)");
    }
  }

  // plotly.js (3.6 MB) is fetched only where there are figures, and only now: inserted by this
  // deferred script, after the page is parsed, it runs after DOMContentLoaded and never holds up
  // the page's text. It is hooked on its load event, before the figure scripts (which wait for
  // the same event and register later) draw.
  // MathJax (deferred, after this script) typesets every formula as soon as it runs, which
  // would hold up DOMContentLoaded by a second on a page full of maths: it starts a task later.
  if (window.MathJax && !window.MathJax.version) {
    const startup = window.MathJax.startup = window.MathJax.startup || {};
    if (!startup.pageReady) {
      startup.pageReady = () => new Promise(done => setTimeout(done, 0)).then(() => window.MathJax.startup.defaultPageReady());
    }
  }
  if (window.Plotly) hook(window.Plotly);
  else if (document.querySelector(".mlbook-plotly")) {
    const script = document.createElement("script");
    script.src = new URL("plotly/plotly.min.js", document.currentScript.src).href;
    script.addEventListener("load", () => hook(window.Plotly));
    document.head.appendChild(script);
  }
  new MutationObserver(restyleAll).observe(document.documentElement, {attributes: true, attributeFilter: ["data-theme"]});
  let resizeTimer = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => { restyleAll(); scrollables(); }, 200);
  });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", repair);
  else repair();
  window.addEventListener("load", repair);
})();
