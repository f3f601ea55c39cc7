// sluice dashboard: polls /admin/v1/stats every second and draws per-route
// request rates with uPlot. Every value from the server is written with
// textContent, never as HTML: keys come from clients.
"use strict";
(function () {
  const HISTORY = 120; // points kept per chart (two minutes)
  const charts = new Map(); // route -> {plot, data, el}
  let prev = null; // previous stats answer
  let failures = 0;
  // The stats URL is built from origin and path, never from the page's URL:
  // a page opened as http://user:token@host/admin/ has credentials in its
  // URL, and fetch refuses a URL that carries them (the browser sends the
  // cached Basic credentials by itself).
  const STATS = location.origin + location.pathname.replace(/[^/]*$/, "") + "v1/stats";

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function badge(text, cls) { return el("span", { class: "badge " + (cls || "") }, text); }

  function chartFor(route) {
    let c = charts.get(route);
    if (c) return c;
    const box = el("div", { class: "chart", "data-route": route, "data-denied": "0", "data-admitted": "0" });
    box.appendChild(el("h3", {}, route));
    const target = el("div");
    box.appendChild(target);
    document.getElementById("charts").appendChild(box);
    const data = [[], [], [], [], []];
    const width = Math.max(420, box.clientWidth || 460);
    const plot = new uPlot({
      width: width, height: 200,
      scales: { x: { time: true }, y: { range: (u, lo, hi) => [0, Math.max(1, hi * 1.1)] } },
      series: [
        {},
        { label: "admitted/s", stroke: "#2e7d32", fill: "rgba(46,125,50,0.08)", width: 2 },
        { label: "denied/s", stroke: "#c62828", fill: "rgba(198,40,40,0.10)", width: 2 },
        { label: "shadow-denied/s", stroke: "#ef6c00", width: 2, dash: [6, 4] },
        { label: "shed/s", stroke: "#6a1b9a", width: 2, dash: [2, 3] },
      ],
      axes: [{}, { label: "req/s", size: 50 }],
    }, data, target);
    c = { plot, data, box };
    charts.set(route, c);
    return c;
  }

  function push(c, t, a, d, s, shed) {
    const series = [t, a, d, s, shed];
    for (let i = 0; i < series.length; i++) {
      c.data[i].push(series[i]);
      if (c.data[i].length > HISTORY) c.data[i].shift();
    }
    c.plot.setData(c.data);
    const sum = (arr) => arr.reduce((x, y) => x + (y || 0), 0);
    c.box.dataset.admitted = String(sum(c.data[1]));
    c.box.dataset.denied = String(sum(c.data[2]));
    c.box.dataset.shadowDenied = String(sum(c.data[3]));
    c.box.dataset.shed = String(sum(c.data[4]));
    c.box.dataset.points = String(c.data[0].length);
  }

  function rows(id, items, cells, emptyText, cols) {
    const body = document.querySelector("#" + id + " tbody");
    body.replaceChildren();
    if (!items.length) {
      const tr = el("tr", { class: "empty" });
      tr.appendChild(el("td", { colspan: String(cols) }, emptyText));
      body.appendChild(tr);
      return;
    }
    for (const it of items) {
      const tr = el("tr");
      for (const [text, cls] of cells(it)) tr.appendChild(el("td", cls ? { class: cls } : {}, text));
      body.appendChild(tr);
    }
  }

  function keyText(parts) { return (parts || []).join(" · "); }

  function render(s) {
    const t = s.time / 1000;
    if (prev) {
      const dt = Math.max(0.001, (s.time - prev.time) / 1000);
      const before = new Map(prev.routes.map((r) => [r.route, r]));
      for (const r of s.routes) {
        const p = before.get(r.route) || r;
        const rate = (k) => Math.max(0, r[k] - p[k]) / dt;
        push(chartFor(r.route), t, rate("admitted"), rate("denied"), rate("shadow_denied"), rate("shed"));
      }
    } else {
      for (const r of s.routes) chartFor(r.route);
    }
    prev = s;

    const st = s.store;
    const status = document.getElementById("status");
    status.replaceChildren(
      badge("store: " + st.type + (st.mode ? " (" + st.mode + ")" : "")),
      badge(st.healthy ? "store healthy" : "store down", st.healthy ? "ok" : "bad"),
      badge("breaker: " + st.breaker, st.breaker === "open" ? "bad" : (st.breaker === "closed" ? "ok" : "")),
      badge(st.fallback_active ? "fallback active (" + st.on_error + ")" : "fallback idle", st.fallback_active ? "warn" : ""),
      badge("on_error: " + st.on_error),
    );
    if (st.error) status.lastChild.title = st.error;
    document.getElementById("updated").textContent = "updated " + new Date(s.time).toLocaleTimeString();

    document.getElementById("topwindow").textContent = "(last " + Math.round(s.top_window_seconds / 60) + " min)";
    // Keys arrive hashed unless server.access_log.raw_keys is on.
    for (const id of ["topkeys-key", "overrides-key"]) {
      document.getElementById(id).textContent = s.keys_hashed ? "key (hashed)" : "key";
    }
    rows("topkeys", s.top_keys || [], (k) => [[k.route], [keyText(k.key), "key"], [String(k.denied) + (k.error ? " (±" + k.error + ")" : ""), "num"]], "no key limited", 3);
    rows("overrides", s.overrides || [], (o) => [[o.route], [keyText(o.key), "key"], [o.policy]], "none", 3);

    // Pool routes' targets; the section shows only when there are some.
    const pools = s.pools || [];
    document.getElementById("pools-section").hidden = !pools.length;
    const targets = [];
    for (const p of pools) for (const t of p.targets || []) targets.push({ route: p.route, t: t });
    rows("pools", targets, (x) => [[x.route], [x.t.target, "key"], [x.t.up ? "up" : "down", x.t.up ? "ok" : "bad"], [String(x.t.in_flight), "num"], [String(x.t.requests), "num"]], "no pool", 5);

    const cfg = s.config;
    document.getElementById("summary").textContent = cfg.summary;
    rows("routes", cfg.routes || [], (r) => [[r.id], [r.path, "key"], [r.target], [(r.limits || []).map((l) => l.policy + " (" + l.algorithm + ") by " + l.key + (l.shadow ? ", shadow" : "")).join("; ") || "none"]], "no routes", 4);
    const eff = document.getElementById("effective");
    if (eff.textContent !== cfg.effective) eff.textContent = cfg.effective;
  }

  async function tick() {
    try {
      const res = await fetch(STATS, { cache: "no-store", credentials: "same-origin" });
      if (!res.ok) throw new Error("HTTP " + res.status);
      render(await res.json());
      failures = 0;
    } catch (e) {
      failures++;
      document.getElementById("updated").textContent = "cannot reach the admin API (" + e.message + ")";
    }
    setTimeout(tick, 1000);
  }
  tick();
})();
