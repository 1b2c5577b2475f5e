// taskscale dashboard: plain JS, no build step, no dependencies.
// Every value from the API is written with textContent (never innerHTML),
// so whatever a task argument or an error contains is shown as text.
"use strict";

(function () {
  const body = document.body;
  const root = body.dataset.root || "";
  const TOKEN_KEY = "taskscale-token";
  const POLL_MS = 2000;
  const HISTORY = 150; // samples kept per type: 5 minutes at 2 s

  // --- helpers ---------------------------------------------------------------------------
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else node.setAttribute(k, v);
    }
    for (const c of children) node.append(c);
    return node;
  }
  function ago(s) {
    if (s === null || s === undefined) return "—";
    if (s < 120) return s.toFixed(1) + " s";
    if (s < 7200) return (s / 60).toFixed(1) + " min";
    return (s / 3600).toFixed(1) + " h";
  }
  function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }
  async function getJSON(path) {
    const r = await fetch(root + path, { headers: { Accept: "application/json" } });
    if (!r.ok) throw new Error(path + ": HTTP " + r.status);
    return r.json();
  }
  async function post(path, doc) {
    const r = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Taskscale-Token": token() },
      body: JSON.stringify(doc || {}),
      credentials: "omit",
    });
    let answer = {};
    try { answer = await r.json(); } catch (e) { answer = { error: "HTTP " + r.status }; }
    if (!r.ok) throw new Error(answer.error || "HTTP " + r.status);
    return answer;
  }
  function sparkline(values, cls) {
    const ns = "http://www.w3.org/2000/svg";
    const w = 120, h = 24;
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
    svg.setAttribute("class", "spark " + cls);
    svg.setAttribute("width", w);
    svg.setAttribute("height", h);
    if (values.length > 1) {
      const top = Math.max(1, ...values);
      // a short history is drawn across a minute's width, not squeezed at the right end
      const step = w / (Math.max(30, values.length) - 1);
      const x0 = w - step * (values.length - 1);
      const pts = values.map((v, i) =>
        (x0 + i * step).toFixed(1) + "," + (h - 1 - (v / top) * (h - 3)).toFixed(1));
      const line = document.createElementNS(ns, "polyline");
      line.setAttribute("points", pts.join(" "));
      svg.append(line);
      const title = document.createElementNS(ns, "title");
      title.textContent = "now " + values[values.length - 1].toFixed(1) + ", max " + top.toFixed(1);
      svg.append(title);
    }
    return svg;
  }

  // --- the token -------------------------------------------------------------------------
  const mode = document.getElementById("mode");
  function showMode(text, cls) { if (mode) { mode.textContent = text; mode.className = "mode " + (cls || ""); } }
  async function checkToken() {
    if (body.dataset.writable !== "yes") return;
    if (!token()) { showMode("locked: read-only until you unlock"); return; }
    try { await post(root + "/api/auth", {}); showMode("unlocked", "ok"); }
    catch (e) { showMode("wrong token", "bad"); }
  }
  const unlock = document.getElementById("unlock");
  if (unlock) {
    unlock.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const input = document.getElementById("token");
      if (input) { sessionStorage.setItem(TOKEN_KEY, input.value); input.value = ""; }
      checkToken();
    });
  }
  checkToken();

  // --- overview: live table with sparklines ----------------------------------------------
  const history = new Map(); // type -> {prev, queued: [], done: []}
  function overviewRow(name, t, now, h, rate) {
    const link = el("a", { href: root + "/types/" + encodeURIComponent(name), text: name });
    const prio = t.queued_by_priority.map((n, i) => (n ? `p${i}:${n}` : "")).filter(Boolean).join(" ");
    let completedRate = null, failedRate = null, deadRate = null, wait = null;
    if (rate) {
      // the last full minute of the history kept in Redis: real on the first load
      completedRate = rate.completed_per_s;
      failedRate = rate.failed_per_s;
      deadRate = rate.dead_per_s;
    }
    if (h.prev) {
      const dt = Math.max(0.001, now - h.prev.now);
      if (!rate) {
        completedRate = (t.completed - h.prev.completed) / dt;
        failedRate = (t.failed - h.prev.failed) / dt;
        // from the dead-lettered counter, not the list: a retry or delete shrinks the list
        deadRate = (t.dead_lettered - h.prev.dead_lettered) / dt;
      }
      const claimed = t.claimed - h.prev.claimed;
      if (claimed > 0) wait = (t.wait_ms - h.prev.wait_ms) / claimed / 1000;
    }
    h.queued.push(t.queued);
    if (rate && !h.prev) h.done = rate.done_per_s.slice(); // the last minute, on the first load
    else if (rate) h.done.push(rate.done_per_s[rate.done_per_s.length - 1] || 0);
    else h.done.push(completedRate || 0);
    while (h.queued.length > HISTORY) h.queued.shift();
    while (h.done.length > HISTORY) h.done.shift();
    h.prev = {
      now, completed: t.completed, failed: t.failed, dead_lettered: t.dead_lettered,
      claimed: t.claimed, wait_ms: t.wait_ms,
    };
    const paused = t.paused_since_ms !== null && t.paused_since_ms !== undefined
      ? [" ", el("span", { class: "bad", "data-field": "paused", text: "paused" })] : [];
    const cells = [
      el("td", {}, link, ...paused),
      el("td", { class: "num", "data-field": "queued" },
        el("b", { text: String(t.queued) }), " ", el("span", { class: "muted", text: prio })),
      el("td", { class: "num", "data-field": "delayed", text: String(t.delayed) }),
      el("td", { class: "num", text: String(t.due_soon) }),
      el("td", { class: "num", "data-field": "active", text: String(t.active) }),
      el("td", { class: "num", text: completedRate === null ? "…" : completedRate.toFixed(1) }),
      el("td", { class: "num" + (failedRate ? " bad" : ""), text: failedRate === null ? "…" : failedRate.toFixed(1) }),
      el("td", { class: "num" + (deadRate ? " bad" : ""), "data-field": "dead-rate", text: deadRate === null ? "…" : deadRate.toFixed(1) }),
      el("td", { class: "num" }, t.dead
        ? el("a", { href: root + "/dead/" + encodeURIComponent(name), class: "bad", text: String(t.dead) })
        : el("span", { text: "0" })),
      el("td", { class: "num", text: wait === null ? "—" : ago(wait) }),
      el("td", { class: "num", text: ago(t.oldest_ready_s) }),
      el("td", { class: "num", text: t.active ? "busy" : ago(t.idle_for_s) }),
      el("td", {}, sparkline(h.queued, "queued")),
      el("td", {}, sparkline(h.done, "done")),
    ];
    return el("tr", { "data-type": name }, ...cells);
  }
  async function refreshOverview() {
    const doc = await getJSON("/api/overview");
    const tbody = document.querySelector("#overview tbody");
    const rows = [];
    for (const [name, t] of Object.entries(doc.types)) {
      if (!history.has(name)) history.set(name, { prev: null, queued: [], done: [] });
      rows.push(overviewRow(name, t, doc.now, history.get(name), (doc.rates || {})[name]));
    }
    if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "14", class: "muted", text: "no task types yet" })));
    tbody.replaceChildren(...rows);
    const warnings = document.getElementById("warnings");
    const notes = doc.warnings.slice();
    for (const name of doc.unserved || []) {
      // the status already warns about a type with ready tasks and no worker
      if (!notes.some((w) => w.startsWith(name + ":"))) notes.push(name + ": enqueued, and no live worker serves it");
    }
    warnings.replaceChildren(...notes.map((w) => el("p", { class: "warn", text: w })));
    document.getElementById("clock").textContent =
      `${doc.workers.length} worker(s), ${doc.schedulers.length} scheduler(s) · ` +
      new Date(doc.now * 1000).toISOString().slice(11, 19) + "Z";
  }

  // --- scaling: current/desired and the timeline ------------------------------------------
  function scalerCard(s, now) {
    const head = el("div", { class: "replicas" },
      el("span", { class: "big", "data-field": "current", text: s.current === null || s.current === undefined ? "?" : String(s.current) }),
      el("span", { class: "arrow", text: "→" }),
      el("span", { class: "big", "data-field": "desired", text: s.desired === null || s.desired === undefined ? "?" : String(s.desired) }),
      el("span", { class: "muted", text: s.jobs ? ` active Jobs (max ${s.max ?? "?"})` : ` replicas (min ${s.min ?? "?"}, max ${s.max ?? "?"})` }));
    // Job mode: the Jobs by phase (pending = no worker has claimed yet: no pod, Pending, starting)
    const jobs = s.jobs ? el("p", { class: "jobs" }, "Jobs: ",
      ...["pending", "running", "succeeded", "failed"].flatMap((phase, i) => [
        i ? " · " : "",
        el("span", { "data-field": "jobs-" + phase, text: String(s.jobs[phase] ?? 0) }),
        " " + phase + (phase === "pending" ? " (not claimed yet)" : "")])) : "";
    const items = (s.decisions || []).map((d) => el("li", { class: d.problem ? "problem" : (d.scaled ? "scaled" : "") },
      el("time", { text: new Date(d.at * 1000).toISOString().slice(11, 19) + "Z" }),
      el("span", { class: "code", text: d.problem || d.reason_code || "?" }),
      el("span", { class: "sentence", text: d.problem ? d.message : d.reason })));
    const types = (s.types || []).map((t) => el("a", { href: root + "/types/" + encodeURIComponent(t), text: t }));
    return el("section", { class: "card scaler", "data-scaler": s.scaler },
      el("h2", { text: s.scaler }, el("small", { text: s.jobs ? " runs one Job per task" : " sizes " + (s.target || "?") })),
      head,
      jobs,
      el("p", { class: "sentence now", text: s.problem ? s.problem + ": " + s.message : s.reason || "" }),
      ...(s.rollout_hold ? [el("p", { class: "warn", "data-field": "rollout-hold",
        text: "Rollout in progress: scale-down held until it ends" })] : []),
      protectionLine(s),
      el("p", { class: "muted" }, "types: ", ...types.flatMap((a) => [a, " "]),
        ` · last pass ${ago(now - s.reported_ms / 1000)} ago`),
      el("ol", { class: "timeline" }, ...items));
  }
  // busy pods marked against voluntary disruption, pods on a draining node (issue 23)
  function protectionLine(s) {
    if (!Array.isArray(s.protected) || !s.draining) return el("p", { class: "muted", text: "" });
    const draining = Object.entries(s.draining);
    return el("p", { class: "protection" },
      "busy pods protected: ", el("span", { "data-field": "protected", text: String(s.protected.length) }),
      s.protected.length ? ` (${s.protected.join(", ")})` : "",
      " · pods draining: ", el("span", { "data-field": "draining", text: String(draining.length) }),
      draining.length ? ` (${draining.map(([pod, node]) => pod + " on " + node).join(", ")})` : "");
  }
  async function refreshScaling() {
    const doc = await getJSON("/api/scalers");
    const now = Date.now() / 1000;
    const box = document.getElementById("scalers");
    const cards = doc.scalers.map((s) => scalerCard(s, now));
    if (!cards.length) cards.push(el("p", { class: "muted", text: "No scaler has reported yet (the controller records its passes here)." }));
    box.replaceChildren(...cards);
  }

  function poll(fn) {
    const run = async () => {
      try {
        await fn();
        body.classList.remove("stale");
      } catch (e) {
        body.classList.add("stale"); // shown greyed out until a refresh succeeds
        console.warn("refresh failed:", e);
      }
      setTimeout(run, POLL_MS);
    };
    run();
  }
  if (body.dataset.page === "overview") poll(refreshOverview);
  if (body.dataset.page === "scaling") poll(refreshScaling);

  // --- buttons that change state (dead letters, delayed tasks) ----------------------------
  for (const button of document.querySelectorAll("button.act")) {
    button.addEventListener("click", async () => {
      if (!window.confirm(button.dataset.confirm || "Sure?")) return;
      const out = document.getElementById("act-result");
      try {
        const answer = await post(button.dataset.post, JSON.parse(button.dataset.body || "{}"));
        out.textContent = "done: " + answer.done;
        window.location.reload();
      } catch (e) {
        out.textContent = "refused: " + e.message;
        out.className = "bad";
      }
    });
  }

  // --- a type's limits (type page) -------------------------------------------------------
  const limitsForm = document.getElementById("limits-form");
  if (limitsForm) {
    limitsForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      const out = document.getElementById("act-result");
      const value = (name) => limitsForm.elements[name].value.trim();
      const doc = { rate: value("rate"), burst: value("burst"), concurrency: value("concurrency") };
      const clearing = !doc.rate && !doc.concurrency;
      if (clearing && !window.confirm("Remove every limit of this type?")) return;
      try {
        const answer = await post(limitsForm.dataset.post, doc);
        out.textContent = "limits: " + answer.limits;
        out.className = "";
        window.location.reload();
      } catch (e) {
        out.textContent = "refused: " + e.message;
        out.className = "bad";
      }
    });
  }

  // --- the generated task form ------------------------------------------------------------
  const form = document.getElementById("task-form");
  function collect() {
    const args = [], kwargs = {};
    for (const input of form.querySelectorAll("[data-input]")) {
      const kind = input.dataset.input, target = input.dataset.target;
      let value;
      if (kind === "bool") value = input.checked;
      else if (input.value === "" && !input.required) continue;
      else if (kind === "int") value = parseInt(input.value, 10);
      else if (kind === "float") value = parseFloat(input.value);
      else if (kind === "str") value = input.value;
      else {
        try { value = JSON.parse(input.value); }
        catch (e) { throw new Error(input.name + ": not JSON (" + e.message + ")"); }
      }
      if (target === "args") args.push(...(Array.isArray(value) ? value : [value]));
      else if (target === "kwargs") Object.assign(kwargs, value || {});
      else if (target === "arg") args.push(value);
      else kwargs[input.name] = value;
    }
    return { args, kwargs };
  }
  async function follow(id, out) {
    let seen = false;
    for (let i = 0; i < 600; i++) {
      const t = await getJSON("/api/tasks/" + encodeURIComponent(id));
      if (t.state === "unknown") {
        // an enqueued task keeps no result: gone from queues and workers = done
        out.textContent = `task ${id}: completed` + (seen ? "" : " (before the first look)");
        out.dataset.state = "completed";
        return;
      }
      seen = true;
      out.textContent = `task ${id}: ${t.state}` + (t.where ? " (" + t.where + ")" : "") + (t.error ? ": " + t.error : "");
      out.dataset.state = t.state;
      if (t.state === "dead" || t.state === "cancelled") return;  // final states
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  if (form) {
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const out = document.getElementById("form-result");
      const which = (ev.submitter && ev.submitter.dataset.mode) || "enqueue";
      out.className = "result";
      out.dataset.state = "";
      let doc;
      try { doc = collect(); } catch (e) { out.textContent = e.message; out.className = "result bad"; return; }
      doc.priority = form.elements._priority.value;
      const type = encodeURIComponent(form.dataset.type);
      try {
        if (which === "call") {
          doc.timeout = form.elements._timeout.value;
          out.textContent = "calling…";
          const answer = await post(root + "/api/call/" + type, doc);
          out.textContent = answer.ok
            ? `task ${answer.id}: completed, result ${JSON.stringify(answer.result)}`
            : `task ${answer.id}: failed: ${answer.error}`;
          out.dataset.state = answer.ok ? "completed" : "failed";
          if (!answer.ok) out.className = "result bad";
        } else {
          doc.delay = form.elements._delay.value;
          const answer = await post(root + "/api/enqueue/" + type, doc);
          out.textContent = `task ${answer.id}: enqueued`;
          await follow(answer.id, out);
        }
      } catch (e) {
        out.textContent = "refused: " + e.message;
        out.className = "result bad";
      }
    });
  }
})();
