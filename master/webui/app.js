// The drfmesos web UI: no libraries, no CDN. Live over the master's event stream
// (/api/v1/stream, read with fetch so that credentials go in a header, never in a URL);
// slaves and tasks are fetched a page at a time.
"use strict";

const COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                 "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
const PAGE = 50;
const HISTORY = 600; // chart points kept per framework

const view = { cluster: {}, frameworks: {}, roles: {} };
const history = {}; // framework id -> [[t, share, fair]]
const colours = {};
let auth = sessionStorage.getItem("drfmesos-auth") || "";
let slaveOffset = 0, taskOffset = 0, openTask = null;

const $ = (id) => document.getElementById(id);
const el = (tag, attrs = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e[k] = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
};
const pct = (x) => (x == null ? "-" : (100 * x).toFixed(1) + "%");
const res = (r) => Object.entries(r || {}).map(([k, v]) => `${k}:${+v.toFixed(3)}`).join(" ") || "-";
const colour = (id) => colours[id] || (colours[id] = COLOURS[Object.keys(colours).length % COLOURS.length]);

async function api(path) {
  const r = await fetch(path, { headers: { "Authorization": auth, "X-Requested-With": "drfmesos" } });
  if (r.status === 401) { showLogin("401: those credentials were refused"); throw new Error("401"); }
  if (!r.ok) throw new Error((await r.json().catch(() => ({}))).error || r.statusText);
  return r.json();
}

function showLogin(message) {
  $("app").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("live").className = "badge off"; $("live").textContent = "signed out";
}

$("login-form").onsubmit = async (ev) => {
  ev.preventDefault();
  auth = "Basic " + btoa($("user").value + ":" + $("password").value);
  try {
    await api("/api/v1/whoami");
  } catch (e) { return; }
  sessionStorage.setItem("drfmesos-auth", auth);
  start();
};

// -- the live feed ------------------------------------------------------------------------
async function stream() {
  while (true) {
    try {
      const r = await fetch("/api/v1/stream", { headers: { "Authorization": auth, "X-Requested-With": "drfmesos" } });
      if (r.status === 401) { showLogin("401: those credentials were refused"); return; }
      $("live").className = "badge on"; $("live").textContent = "live";
      const reader = r.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      while (true) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          handle(buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
        }
      }
    } catch (e) { /* the master went away: try again */ }
    $("live").className = "badge off"; $("live").textContent = "reconnecting";
    await new Promise((ok) => setTimeout(ok, 2000));
  }
}

function handle(block) {
  let kind = "message", data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith("event: ")) kind = line.slice(7);
    else if (line.startsWith("data: ")) data += line.slice(6);
  }
  if (!data) return;
  const body = JSON.parse(data);
  if (kind === "snapshot") { view.cluster = {}; view.frameworks = {}; view.roles = {}; }
  if (body.cluster) view.cluster = body.cluster;
  for (const section of ["frameworks", "roles"]) {
    for (const [k, v] of Object.entries(body[section] || {})) {
      if (v === null) delete view[section][k]; else view[section][k] = v;
    }
  }
  record(body.t);
  for (const e of body.events || []) addEvent(e);
  render();
}

function record(t) {
  for (const [id, f] of Object.entries(view.frameworks)) {
    const h = history[id] || (history[id] = []);
    h.push([t, f.dominant_share, f.fair_share]);
    if (h.length > HISTORY) h.shift();
  }
}

// -- rendering --------------------------------------------------------------------------------
function bar(fraction, colourName, mark) {
  const b = el("div", { class: "bar" }, el("div", { class: "fill", style: `width:${Math.min(100, 100 * fraction)}%;background:${colourName}` }));
  if (mark != null) b.append(el("div", { class: "mark", style: `left:${Math.min(100, 100 * mark)}%`, title: "fair share" }));
  return b;
}

function render() {
  const c = view.cluster;
  $("master").textContent = `${c.master_id || ""} · policy ${c.policy || ""}`;
  const totals = el("div", { class: "bars" });
  for (const [name, total] of Object.entries(c.total || {})) {
    const used = (c.allocated || {})[name] || 0;
    totals.append(el("span", {}, name), bar(total ? used / total : 0, "#23395d"),
                  el("span", { class: "dim" }, `${+used.toFixed(2)} / ${+total.toFixed(2)}`));
  }
  $("totals").replaceChildren(totals);
  const p = c.preemption;
  $("counters").textContent = `${c.slaves || 0} slaves · ${c.tasks || 0} running tasks · ${c.offers || 0} outstanding offers` +
    (p ? ` · preempted ${p.tasks_preempted} tasks (${Math.round(p.work_lost_seconds)} task-s of work lost), ${p.in_flight} being preempted` : "");
  $("offers").textContent = `(${c.offers || 0})`;

  const rows = Object.values(view.frameworks).sort((a, b) => a.name.localeCompare(b.name));
  $("frameworks").tBodies[0].replaceChildren(...rows.map((f) => el("tr", { "data-framework": f.name },
    el("td", {}, f.name + (f.active ? "" : " (disconnected)")), el("td", { class: "dim" }, f.framework_id),
    el("td", {}, f.role), el("td", { class: "running" }, f.running_tasks), el("td", {}, f.finished_tasks),
    el("td", {}, res(f.allocated)),
    el("td", {}, el("div", { class: "share" }, bar(f.dominant_share, colour(f.framework_id), f.fair_share),
      el("span", { class: "share-value" }, pct(f.dominant_share) + (f.fair_share != null ? ` | ${pct(f.fair_share)}` : "")))))));

  const select = $("task-framework");
  const chosen = select.value;
  select.replaceChildren(el("option", { value: "" }, "all"),
    ...rows.map((f) => el("option", { value: f.framework_id }, f.name)));
  select.value = chosen;

  const roles = Object.values(view.roles).sort((a, b) => a.role.localeCompare(b.role));
  $("roles").tBodies[0].replaceChildren(...roles.map((r) => el("tr", {},
    el("td", {}, r.role), el("td", {}, r.weight), el("td", {}, pct(r.promise)), el("td", {}, pct(r.share)),
    el("td", {}, pct(r.fair_share)), el("td", {}, res(r.guarantee)),
    el("td", {}, res(r.limit) + (r.unsatisfiable ? ` (unsatisfiable: ${r.unsatisfiable})` : "")))));
  drawChart();
  if (!window.__firstRender && rows.length) window.__firstRender = performance.now(); // for benchmarks
}

function drawChart() {
  const canvas = $("chart"), g = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, left = 40, bottom = 20;
  g.clearRect(0, 0, w, h);
  g.strokeStyle = "#ddd"; g.fillStyle = "#888"; g.font = "11px sans-serif"; g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = (h - bottom) * (1 - i / 4);
    g.beginPath(); g.moveTo(left, y); g.lineTo(w, y); g.stroke();
    g.fillText(`${i * 25}%`, 4, y + 4);
  }
  const all = Object.values(history).flat();
  if (!all.length) return;
  const t0 = Math.min(...all.map((p) => p[0])), t1 = Math.max(...all.map((p) => p[0]), t0 + 1);
  const x = (t) => left + (w - left - 5) * (t - t0) / (t1 - t0);
  const y = (s) => (h - bottom) * (1 - Math.min(1, s));
  g.fillText(`${Math.round(t1 - t0)} s`, w - 40, h - 5);
  const legend = [];
  let points = 0;
  for (const [id, h2] of Object.entries(history)) {
    const f = view.frameworks[id];
    g.strokeStyle = colour(id);
    for (const [index, dashed] of [[1, false], [2, true]]) {
      g.setLineDash(dashed ? [6, 4] : []);
      g.lineWidth = dashed ? 1.2 : 2;
      g.beginPath();
      let started = false;
      for (const p of h2) {
        if (p[index] == null) { started = false; continue; }
        if (!started) { g.moveTo(x(p[0]), y(p[index])); started = true; } else g.lineTo(x(p[0]), y(p[index]));
        if (!dashed) points++;
      }
      g.stroke();
    }
    if (f) legend.push(el("span", {}, el("i", { style: `background:${colour(id)}` }), f.name));
  }
  g.setLineDash([]);
  canvas.dataset.points = points;
  $("legend").replaceChildren(...legend);
}

function addEvent(e) {
  const when = new Date(e.timestamp * 1000).toLocaleTimeString();
  const what = [e.kind, e.framework_id && `fw ${e.framework_id}`, e.slave_id && `slave ${e.slave_id}`,
                e.task_id && `task ${e.task_id}`, e.state, e.detail].filter(Boolean).join(" · ");
  const list = $("events");
  list.prepend(el("li", { class: `event-${e.kind}` }, `${when}  ${what}`));
  while (list.children.length > 100) list.lastChild.remove();
}

// -- pages of slaves and tasks ----------------------------------------------------------------
async function loadSlaves() {
  const page = await api(`/api/v1/slaves?offset=${slaveOffset}&limit=${PAGE}`);
  $("slave-count").textContent = `(${page.total})`;
  $("slaves-page").textContent = `${page.total ? slaveOffset + 1 : 0}-${Math.min(slaveOffset + PAGE, page.total)}`;
  $("slaves").tBodies[0].replaceChildren(...page.slaves.map((s) => {
    const bars = el("div", { class: "bars" });
    for (const [name, total] of Object.entries(s.total)) {
      const used = total - ((s.free || {})[name] || 0);
      bars.append(el("span", {}, name), bar(total ? used / total : 0, "#5b7bb2"), el("span", { class: "dim" }, `${+used.toFixed(2)} / ${+total.toFixed(2)}`));
    }
    return el("tr", {}, el("td", {}, s.slave_id), el("td", {}, s.hostname), el("td", {}, s.tasks), el("td", {}, bars));
  }));
  return page.total;
}

async function loadTasks() {
  const fw = $("task-framework").value, state = $("task-state").value;
  const page = await api(`/api/v1/tasks?framework=${encodeURIComponent(fw)}&state=${encodeURIComponent(state)}&offset=${taskOffset}&limit=${PAGE}`);
  $("task-count").textContent = `(${page.total})`;
  $("tasks-page").textContent = `${page.total ? taskOffset + 1 : 0}-${Math.min(taskOffset + PAGE, page.total)}`;
  const names = Object.fromEntries(Object.values(view.frameworks).map((f) => [f.framework_id, f.name]));
  $("tasks").tBodies[0].replaceChildren(...page.tasks.map((t) => el("tr", { "data-task": t.task_id },
    el("td", {}, t.task_id), el("td", {}, names[t.framework_id] || t.framework_id), el("td", {}, t.slave_id),
    el("td", { title: t.message || "" }, t.state + (t.reason ? ` (${t.reason})` : "")), el("td", {}, res(t.resources)),
    el("td", {}, el("button", { class: "stdout", onclick: () => showFile(t, "stdout") }, "stdout"), " ",
      el("button", { class: "stderr", onclick: () => showFile(t, "stderr") }, "stderr")))));
  return page.total;
}

async function loadOffers() {
  const page = await api(`/api/v1/offers?limit=${PAGE}`);
  const names = Object.fromEntries(Object.values(view.frameworks).map((f) => [f.framework_id, f.name]));
  $("offer-list").tBodies[0].replaceChildren(...page.offers.map((o) => el("tr", {},
    el("td", { class: "dim" }, o.offer_id), el("td", {}, names[o.framework_id] || o.framework_id),
    el("td", {}, o.hostname || o.slave_id), el("td", {}, res(o.resources)))));
  return page.total;
}

// what each principal's rate limit held: calls that waited (throttled) or were refused
async function loadLimits() {
  const l = await api("/api/v1/limits");
  const limit = (x) => (x.qps == null ? "no limit" : `${x.qps} calls/s, capacity ${x.capacity ?? "any"}`);
  $("limits-default").textContent = `(default: ${limit(l.default)}` +
    (l.aggregate_default ? `; the rest together: ${limit(l.aggregate_default)})` : ")");
  $("limits").tBodies[0].replaceChildren(...l.principals.map((p) => el("tr", { "data-principal": p.principal },
    el("td", {}, p.principal + (p.queue === "*" ? " (aggregate)" : "")), el("td", {}, p.qps ?? "-"),
    el("td", {}, p.capacity ?? "-"), el("td", {}, p.handled), el("td", {}, p.throttled),
    el("td", {}, p.refused), el("td", {}, p.queued))));
  return l.principals.length;
}

async function showFile(task, name) {
  openTask = [task, name];
  $("sandbox").hidden = false;
  $("sandbox-title").textContent = `${task.task_id}: ${name}`;
  try {
    const f = await api(`/api/v1/tasks/${encodeURIComponent(task.framework_id)}/${encodeURIComponent(task.task_id)}/files/${name}?offset=0&length=65536`);
    $("sandbox-text").textContent = f.data + (f.size > f.data.length ? `\n... (${f.size} bytes in all)` : "");
  } catch (e) {
    $("sandbox-text").textContent = `(${e.message})`;
  }
}

$("slaves-prev").onclick = () => { slaveOffset = Math.max(0, slaveOffset - PAGE); loadSlaves(); };
$("slaves-next").onclick = async () => { slaveOffset += PAGE; if (slaveOffset >= await loadSlaves()) { slaveOffset -= PAGE; loadSlaves(); } };
$("tasks-prev").onclick = () => { taskOffset = Math.max(0, taskOffset - PAGE); loadTasks(); };
$("tasks-next").onclick = async () => { taskOffset += PAGE; if (taskOffset >= await loadTasks()) { taskOffset -= PAGE; loadTasks(); } };
$("task-framework").onchange = $("task-state").onchange = () => { taskOffset = 0; loadTasks(); };

let polling = null;
async function start() {
  $("login").hidden = true;
  $("app").hidden = false;
  stream();
  const poll = () => Promise.all([loadSlaves(), loadTasks(), loadOffers(), loadLimits()]).catch(() => {});
  await poll();
  if (!polling) polling = setInterval(poll, 2000);
}

(async () => {
  try { await api("/api/v1/whoami"); } catch (e) { return; } // 401: the form is shown
  start();
})();
