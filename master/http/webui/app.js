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
let slaveOffset = 0, taskOffset = 0;

const $ = (id) => document.getElementById(id);
const el = (tag, attrs = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k === "style") e.style.cssText = v; // (the CSSOM: the page's CSP allows no inline style attributes)
    else if (k.startsWith("on")) e[k] = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
};
const link = (route, text) => el("a", { href: "#" + route.map(encodeURIComponent).join("/") }, text);
const when = (t) => (t ? new Date(t * 1000).toLocaleString() : "-");
const pct = (x) => (x == null ? "-" : (100 * x).toFixed(1) + "%");
const count = (n, one) => `${n || 0} ${one}${n === 1 ? "" : "s"}`;  // 1 slave, 2 slaves
// an amount with its unit: mem and disk are MB (GB from 1024 MB), cpus and gpus counted
// a reserved resource's name says whose it is: cpus(team-a) is cpus, reserved for team-a
// (a volume's, disk(team-a)[db:data]): shown as the amount, then whose
const whose = (name) => /^([^([]*)(.*)$/.exec(name).slice(1);
const amount = (key, v) => {
  const n = (x, d) => `${+(+x).toFixed(d)}`;
  const [name, owner] = whose(key);
  const of = owner ? ` ${owner}` : "";
  if (name === "mem" || name === "disk") return (v >= 1024 ? `${n(v / 1024, 1)} GB` : `${n(v, 1)} MB`) + of;
  if (name === "cpus" || name === "gpus") return `${n(v, 2)} ${name}${of}`;
  return `${n(v, 3)} ${name}${of}`;
};
const ORDER = ["cpus", "mem", "disk", "gpus"]; // the known resources first, in this order
const rank = (key) => { const name = whose(key)[0]; return ORDER.includes(name) ? ORDER.indexOf(name) : ORDER.length; };
// `values`: the ranges and sets among them (ports), shown as their values, not their count
const res = (r, values = {}) => Object.entries(r || {}).sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b))
  .map(([k, v]) => (values[k] ? `${k} ${values[k]}` : amount(k, v))).join(", ") || "-";
const TERMINAL = new Set(["TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_LOST", "TASK_ERROR",
                          "TASK_DROPPED", "TASK_GONE", "TASK_GONE_BY_OPERATOR"]);
// a framework keeps one colour, in the table, the chart and the legend: given in the order
// the master first saw the frameworks (its history's order), so a reload gives the same
const colour = (id) => colours[id] || (colours[id] = COLOURS[Object.keys(colours).length % COLOURS.length]);
const names = () => Object.fromEntries(Object.values(view.frameworks).map((f) => [f.framework_id, f.name]));
const nameOf = (id) => names()[id] || knownNames[id] || id;
// a framework's name, with a short id beside it when another framework shown has the same
const shortId = (id) => id.replace(/^fw-/, "").slice(0, 6);
const shownNames = () => {
  const count = {};
  for (const f of shownFrameworks()) count[f.name] = (count[f.name] || 0) + 1;
  return count;
};
const label = (id, name) => ((shownNames()[name] || 0) > 1 ? `${name} (${shortId(id)})` : name);
// the frameworks the page shows: the registered ones, and the completed ones when asked
const showCompleted = () => $("show-completed").checked;
const shownFrameworks = () => [...Object.values(view.frameworks),
  ...(showCompleted() ? Object.values(completed).filter((f) => !view.frameworks[f.framework_id]) : [])];
const knownNames = {}; // frameworks seen, kept after they are gone (for the events)

const refused = () => (auth ? "401: those credentials were refused" : ""); // nothing typed: nothing refused

async function api(path) {
  const r = await fetch(path, { headers: { "Authorization": auth, "X-Requested-With": "drfmesos" } });
  if (r.status === 401) { showLogin(refused()); throw new Error("401"); }
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
  } catch (e) { // 401 is said by api(); anything else (403: a framework principal) said here
    if (e.message !== "401") $("login-error").textContent = `refused: ${e.message}`;
    return;
  }
  sessionStorage.setItem("drfmesos-auth", auth);
  start();
};

// -- the live feed ------------------------------------------------------------------------
// When the master stops answering, the page says so at its top, stops polling, and tries
// again less and less often (2 s doubling to 30 s) rather than flooding it when it is back.
let down = null, retry = 2000;

function masterDown() {
  if (!down) down = new Date();
  $("outage").hidden = false;
  $("outage").textContent = `The master is not answering (since ${down.toLocaleTimeString()}): what you see is ` +
    `as it was then. Trying again in ${Math.round(retry / 1000)} s.`;
  $("live").className = "badge off"; $("live").textContent = "master down";
}

function masterUp() {
  down = null; retry = 2000;
  $("outage").hidden = true;
  $("live").className = "badge on"; $("live").textContent = "live";
}

async function stream() {
  while (true) {
    try {
      const r = await fetch("/api/v1/stream", { headers: { "Authorization": auth, "X-Requested-With": "drfmesos" } });
      if (r.status === 401) { showLogin(refused()); return; }
      if (!r.ok) throw new Error(r.statusText);
      masterUp();
      loadEvents();
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
    } catch (e) { /* the master went away: say so, and try again later */ }
    masterDown();
    await new Promise((ok) => setTimeout(ok, retry));
    retry = Math.min(30000, retry * 2);
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
  if (kind === "snapshot") {
    view.cluster = {}; view.frameworks = {}; view.roles = {};
    for (const k of Object.keys(history)) delete history[k];
    for (const [t, shares] of body.history || []) { // the master's own record: a reload keeps the chart
      for (const [id, [share, fair]] of Object.entries(shares)) (history[id] = history[id] || []).push([t, share, fair]);
    }
  }
  if (body.cluster) view.cluster = body.cluster;
  for (const section of ["frameworks", "roles"]) {
    for (const [k, v] of Object.entries(body[section] || {})) {
      if (v === null) delete view[section][k]; else view[section][k] = v;
    }
  }
  for (const f of Object.values(view.frameworks)) knownNames[f.framework_id] = f.name;
  for (const [id, name] of Object.entries(body.names || {})) { knownNames[id] = name; colour(id); }
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

// used and allocated in one bar: the allocation light, what was used (its slave's last
// usage report; none yet: no dark part) dark over it, both of `total`
function usedBar(used, allocated, total) {
  const b = bar(total ? allocated / total : 0, "#aebfdc");
  b.classList.add("used-bar");
  const num = (x) => +(+x).toFixed(2);
  b.title = `allocated ${num(allocated)} of ${num(total)}` + (used == null ? "" : `, used ${num(used)}`);
  if (used != null) {
    b.append(el("div", { class: "fill used", style: `width:${Math.min(100, total ? 100 * used / total : 0)}%;background:#23395d` }));
  }
  return b;
}

function render() {
  const c = view.cluster;
  $("master").textContent = `${c.master_id || ""} · policy ${c.policy || ""}`;
  const totals = el("div", { class: "bars" });
  for (const [name, total] of Object.entries(c.total || {})) {
    const used = (c.allocated || {})[name] || 0;
    totals.append(el("span", {}, name), bar(total ? used / total : 0, "#23395d"),
                  el("span", { class: "dim" }, `${amount(name, used)} / ${amount(name, total)}`));
  }
  $("totals").replaceChildren(totals);
  const p = c.preemption;
  $("counters").textContent = `${count(c.slaves, "slave")} · ${count(c.tasks, "running task")} · ${count(c.offers, "outstanding offer")}` +
    (p ? ` · preempted ${count(p.tasks_preempted, "task")} (${Math.round(p.work_lost_seconds)} task-s of work lost), ${p.in_flight} being preempted` : "");

  const rows = Object.values(view.frameworks).sort((a, b) => a.name.localeCompare(b.name));
  const ended = Object.values(completed).filter((f) => !view.frameworks[f.framework_id]).reverse(); // newest first
  const gone = showCompleted() ? ended : [];
  $("completed-count").textContent = `(${ended.length})`;
  $("frameworks").tBodies[0].replaceChildren(...[...rows, ...gone].map((f) => el("tr", { "data-framework": f.name, class: f.removed_at ? "completed" : "" },
    el("td", {}, link(["framework", f.framework_id], label(f.framework_id, f.name)),
      f.removed_at ? el("span", { class: "dim", title: f.removed_why }, ` (completed ${when(f.removed_at)})`) : f.active ? "" : " (disconnected)"),
    el("td", { class: "dim" }, f.framework_id),
    el("td", {}, rolesOf(f)), el("td", { class: "running" }, f.running_tasks), el("td", {}, f.finished_tasks),
    el("td", {}, res(f.allocated)),
    el("td", {}, el("div", { class: "share" }, bar(f.dominant_share, colour(f.framework_id), f.fair_share),
      el("span", { class: "share-value" }, pct(f.dominant_share) + (f.fair_share != null ? ` | ${pct(f.fair_share)}` : "")))))));

  const select = $("task-framework");
  const chosen = select.value;
  select.replaceChildren(el("option", { value: "" }, "all"),
    ...[...rows, ...ended].map((f) => el("option", { value: f.framework_id }, label(f.framework_id, f.name))));
  select.value = chosen;

  $("roles").tBodies[0].replaceChildren(...roleTree(Object.values(view.roles)).map(([r, branch]) => el("tr", { "data-role": r.role },
    el("td", { class: "role" }, el("span", { class: "branch" }, branch), r.role.split("/").pop()), el("td", {}, r.weight), el("td", {}, pct(r.promise)), el("td", {}, pct(r.share)),
    el("td", {}, pct(r.fair_share)), el("td", {}, res(r.guarantee)),
    el("td", {}, res(r.limit) + (r.unsatisfiable ? ` (unsatisfiable: ${r.unsatisfiable})` : "")))));
  drawChart();
  if (!window.__firstRender && rows.length) window.__firstRender = performance.now(); // for benchmarks
}

// a framework's roles: a multi-role one's, or its one role
function rolesOf(f) { return (f.roles || [f.role]).join(", "); }

// the role tree drawn as a tree: each role under its parent, joined by ├─ └─ and │ lines
// (a role's children follow it; the last child of a parent closes its branch with └─)
function roleTree(roles) {
  const parts = (role) => role.split("/");
  const sorted = [...roles].sort((a, b) => {
    const x = parts(a.role), y = parts(b.role);
    for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i].localeCompare(y[i]);
    return x.length - y.length;
  });
  const lastChild = new Set(), parentsSeen = new Set();
  for (const r of [...sorted].reverse()) {
    const parent = parts(r.role).slice(0, -1).join("/");
    if (!parentsSeen.has(parent)) { parentsSeen.add(parent); lastChild.add(r.role); }
  }
  return sorted.map((r) => {
    const p = parts(r.role);
    let branch = "";
    for (let depth = 1; depth < p.length - 1; depth++) branch += lastChild.has(p.slice(0, depth + 1).join("/")) ? "   " : "│  ";
    if (p.length > 1) branch += lastChild.has(r.role) ? "└─ " : "├─ ";
    return [r, branch];
  });
}

function drawChart() {
  const canvas = $("chart"), g = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, left = 44, bottom = 34;
  g.clearRect(0, 0, w, h);
  g.strokeStyle = "#ddd"; g.fillStyle = "#888"; g.font = "11px sans-serif"; g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = (h - bottom) * (1 - i / 4);
    g.beginPath(); g.moveTo(left, y); g.lineTo(w, y); g.stroke();
    g.fillText(`${i * 25}%`, 4, Math.max(10, y + 4));
  }
  const shown = new Set(shownFrameworks().map((f) => f.framework_id));
  const drawn = Object.entries(history).filter(([id]) => shown.has(id));
  const all = drawn.flatMap(([, h2]) => h2);
  if (!all.length) return;
  const t0 = Math.min(...all.map((p) => p[0])), t1 = Math.max(...all.map((p) => p[0]), t0 + 1);
  const x = (t) => left + (w - left - 5) * (t - t0) / (t1 - t0);
  const y = (s) => (h - bottom) * (1 - Math.min(1, s));
  // the time axis: ticks at round steps back from now, and its title
  const span = t1 - t0, step = [5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600].find((s) => span / s <= 6) || 7200;
  const ago = (s) => (s === 0 ? "now" : s % 60 === 0 ? `-${s / 60} min` : `-${s} s`);
  const ticks = [];
  g.textAlign = "center";
  for (let s = 0; s <= span; s += step) {
    const tx = x(t1 - s);
    g.strokeStyle = "#eee"; g.beginPath(); g.moveTo(tx, 0); g.lineTo(tx, h - bottom); g.stroke();
    g.fillText(ago(s), Math.max(left + 12, Math.min(w - 16, tx)), h - bottom + 13);
    ticks.push(ago(s));
  }
  g.fillText("time", left + (w - left) / 2, h - 4);
  g.textAlign = "start";
  canvas.dataset.ticks = ticks.join("|"); // the time axis' labels (for tests)
  canvas.dataset.span = t1 - t0; // seconds of history drawn (for tests)
  const legend = [];
  let points = 0;
  for (const [id, h2] of drawn) {
    const f = view.frameworks[id] || completed[id];
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
    if (h2.length) legend.push(el("span", { "data-framework": id }, el("i", { style: `background:${colour(id)}` }), label(id, f ? f.name : nameOf(id))));
  }
  g.setLineDash([]);
  canvas.dataset.points = points;
  $("legend").replaceChildren(...legend);
}

function addEvent(e) {
  const when = new Date(e.timestamp * 1000).toLocaleTimeString();
  const what = [e.kind, e.framework_id && `framework ${nameOf(e.framework_id)}`, e.slave_id && `slave ${e.slave_id}`,
                e.task_id && `task ${e.task_id}`, e.state, e.detail].filter(Boolean).join(" · ");
  const list = $("events");
  list.prepend(el("li", { class: `event-${e.kind}`, title: e.framework_id || "" }, `${when}  ${what}`));
  while (list.children.length > 100) list.lastChild.remove();
}

const QUIET = new Set(["offer", "accept", "decline", "rescind"]); // as the live feed: counted, not listed

async function loadEvents() { // what the master kept: the list survives a reload
  const page = await api("/api/v1/events?limit=200").catch(() => ({ events: [] }));
  $("events").replaceChildren();
  for (const e of page.events) if (!QUIET.has(e.kind)) addEvent(e);
}

// -- the frameworks removed lately (Mesos's completed frameworks), listed under the live ones ---
let completed = {};
async function loadCompleted() {
  const page = await api("/api/v1/frameworks");
  completed = Object.fromEntries(page.completed_frameworks.map((f) => [f.framework_id, f]));
  for (const f of page.completed_frameworks) knownNames[f.framework_id] = f.name;
  render();
}

// -- pages of slaves and tasks ----------------------------------------------------------------
// an operator took it out: deactivated, draining (and what its drain waits for), drained
function maintenance(s) {
  if (!s.maintenance) return "";
  const n = s.drain_acks_owed;
  return n ? `${s.maintenance} (${n} ${n === 1 ? "framework's" : "frameworks'"} acks owed)` : s.maintenance;
}

async function loadSlaves() {
  const search = encodeURIComponent($("slave-search").value.trim());
  const page = await api(`/api/v1/slaves?offset=${slaveOffset}&limit=${PAGE}&search=${search}`);
  $("slave-count").textContent = `(${page.total})`;
  $("slaves-page").textContent = `${page.total ? slaveOffset + 1 : 0}-${Math.min(slaveOffset + PAGE, page.total)}`;
  $("slaves").tBodies[0].replaceChildren(...page.slaves.map((s) => {
    const bars = el("div", { class: "bars" });
    const values = s.discrete || {}, free = s.free_discrete || {};
    for (const [name, total] of Object.entries(s.total)) {
      if (values[name]) { // ports and other ranges and sets: which are free, not a bar
        bars.append(el("span", {}, name), el("span", { class: "dim values" }, `${free[name] || "none"} free of ${values[name]}`));
        continue;
      }
      const used = total - ((s.free || {})[name] || 0), use = s.used ? s.used[name] || 0 : null;
      bars.append(el("span", {}, name), usedBar(use, used, total),
        el("span", { class: "dim" }, (use == null ? "" : `used ${amount(name, use)} · `) + `${amount(name, used)} / ${amount(name, total)}`));
    }
    const heard = s.last_heartbeat == null ? "" : `${Math.max(0, Date.now() / 1000 - s.last_heartbeat).toFixed(1)} s ago`;
    // (a slave that does not keep tenants apart says so: its tasks may reach each other's)
    const unisolated = s.isolation_warning
      ? el("span", { class: "unisolated", title: s.isolation_warning }, " tenants not isolated") : "";
    return el("tr", {}, el("td", {}, link(["slave", s.slave_id], s.slave_id), unisolated), el("td", {}, s.hostname),
      el("td", {}, s.tasks), el("td", {}, bars),
      el("td", { class: "heard" }, s.connected ? heard : `disconnected (${heard})`),
      el("td", { class: "maintenance" }, maintenance(s)));
  }));
  return page.total;
}

async function loadTasks() {
  const fw = $("task-framework").value, state = $("task-state").value;
  const query = new URLSearchParams({ framework: fw, state, search: $("task-search").value.trim(),
                                      sort: $("task-sort").value, offset: taskOffset, limit: PAGE });
  const page = await api(`/api/v1/tasks?${query}`);
  $("task-count").textContent = `(${page.total})`;
  $("tasks-page").textContent = `${page.total ? taskOffset + 1 : 0}-${Math.min(taskOffset + PAGE, page.total)}`;
  const names = Object.fromEntries(Object.values(view.frameworks).map((f) => [f.framework_id, f.name]));
  $("tasks").tBodies[0].replaceChildren(...page.tasks.map((t) => el("tr", { "data-task": t.task_id },
    el("td", {}, link(["task", t.framework_id, t.task_id], t.task_id)),
    el("td", {}, link(["framework", t.framework_id], label(t.framework_id, names[t.framework_id] || nameOf(t.framework_id)))),
    el("td", {}, link(["slave", t.slave_id], t.slave_id)),
    el("td", { title: t.message || "" }, t.state + (t.reason ? ` (${t.reason})` : "")),
    el("td", { class: "health" }, health(t)), el("td", { class: "resources" }, res(t.resources, t.discrete)),
    el("td", {}, taskUse(t)),
    el("td", {}, el("button", { class: "stdout", onclick: () => showFile(t, "stdout") }, "stdout"), " ",
      el("button", { class: "stderr", onclick: () => showFile(t, "stderr") }, "stderr")))));
  return page.total;
}

function health(t) { // what its health check last said, while it runs ("" : none, or ended)
  if (t.healthy == null || TERMINAL.has(t.state)) return "";
  return el("span", { class: t.healthy ? "healthy" : "unhealthy" }, t.healthy ? "healthy" : "unhealthy");
}

function taskUse(t) { // cpus and mem used beside allocated (a command task's, once reported)
  if (TERMINAL.has(t.state)) return el("span", { class: "ended" }, `ended ${when(t.ended_at)}: holds nothing`);
  const bars = el("div", { class: "bars" });
  for (const name of ["cpus", "mem"]) {
    const have = (t.resources || {})[name];
    if (have == null) continue;
    const use = t.used ? t.used[name] || 0 : null;
    bars.append(el("span", {}, name), usedBar(use, have, have),
      el("span", { class: "dim" }, `${use == null ? "-" : amount(name, use)} / ${amount(name, have)}`));
  }
  return bars;
}

async function loadOffers() {
  const page = await api(`/api/v1/offers?limit=${PAGE}`);
  $("offers").textContent = `(${page.total})`; // the count and the table from one answer
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

// how far behind the master is, and the slaves' comings and goings: behind shows before
// slaves are removed
async function loadHealth() {
  const h = await api("/health");
  const s = (x) => `${(+x).toFixed(2)} s`;
  const health = $("master-health");
  health.textContent = `master ${h.status}: ${h.backlog} waiting to be handled · oldest waited ${s(h.oldest_wait_seconds)}` +
    ` · last probe waited ${s(h.last_wait_seconds)}` + (h.max_backlog_age != null ? ` (behind past ${s(h.max_backlog_age)})` : "");
  health.className = h.status === "behind" ? "error" : "dim";
  const c = h.slave_churn;
  if (!c) return 0;
  const removals = Object.entries(c.removals).map(([cause, n]) => `${n} ${cause}`).join(", ") || "none";
  $("slave-churn").textContent = `slaves: ${c.connected} connected, ${c.disconnected} disconnected · ` +
    `${c.registrations} registrations, ${c.reregistrations} re-registrations, ${c.disconnects} disconnects · removed: ${removals}`;
  return 1;
}

// -- the sandbox viewer: a dialog over the page, wherever the click was -------------------
const CHUNK = 65536;
let sandbox = null; // {task, name, end: bytes shown up to, timer}
const fileUrl = (t, name, offset, length) =>
  `/api/v1/tasks/${encodeURIComponent(t.framework_id)}/${encodeURIComponent(t.task_id)}/files/${name}?offset=${offset}&length=${length}`;

async function showFile(task, name) {
  closeFile();
  sandbox = { task, name, end: 0, timer: null };
  $("sandbox-title").textContent = `${task.task_id}: ${name}`;
  $("sandbox-text").textContent = "";
  $("sandbox-follow").checked = false;
  if (!$("sandbox").open) $("sandbox").showModal();
  await tailFile();
}

async function tailFile() { // the last 64 KB
  const s = sandbox;
  if (!s) return;
  try {
    const head = await api(fileUrl(s.task, s.name, 0, 0));
    const from = Math.max(0, head.size - CHUNK);
    const f = await api(fileUrl(s.task, s.name, from, CHUNK));
    $("sandbox-text").textContent = (from ? `... (${from} bytes before)\n` : "") + f.data;
    s.end = f.offset + f.data.length;
    $("sandbox-size").textContent = `${f.size} bytes`;
    $("sandbox-text").scrollTop = $("sandbox-text").scrollHeight;
  } catch (e) {
    $("sandbox-text").textContent = `(${e.message})`;
  }
}

async function followFile() { // what was written since
  const s = sandbox;
  if (!s || !$("sandbox-follow").checked) return;
  try {
    const f = await api(fileUrl(s.task, s.name, s.end, CHUNK));
    if (f.data) {
      $("sandbox-text").append(f.data);
      s.end = f.offset + f.data.length;
      $("sandbox-text").scrollTop = $("sandbox-text").scrollHeight;
    }
    $("sandbox-size").textContent = `${f.size} bytes`;
  } catch (e) { /* the next turn tries again */ }
  s.timer = setTimeout(followFile, 1000);
}

async function downloadFile() { // the whole file, a megabyte at a time
  const s = sandbox;
  if (!s) return;
  const parts = [];
  for (let offset = 0; ;) {
    const f = await api(fileUrl(s.task, s.name, offset, 1048576));
    parts.push(f.data);
    offset = f.offset + f.data.length;
    if (!f.data || offset >= f.size) break;
  }
  const link = el("a", { href: URL.createObjectURL(new Blob(parts, { type: "text/plain" })),
                         download: `${s.task.task_id}.${s.name}` });
  link.click();
  URL.revokeObjectURL(link.href);
}

function closeFile() {
  if (sandbox && sandbox.timer) clearTimeout(sandbox.timer);
  sandbox = null;
}

$("sandbox-tail").onclick = tailFile;
$("sandbox-follow").onchange = () => { if (sandbox && sandbox.timer) clearTimeout(sandbox.timer); followFile(); };
$("sandbox-download").onclick = downloadFile;
$("sandbox-close").onclick = () => $("sandbox").close();
$("sandbox").onclose = closeFile;

// -- details: a framework, a slave or a task, at #framework/ID, #slave/ID, #task/FW/ID ----
async function frameworkDetails(id) {
  const f = view.frameworks[id];
  const page = await api(`/api/v1/tasks?framework=${encodeURIComponent(id)}&limit=1000`);
  const counts = {};
  for (const t of page.tasks) counts[t.state] = (counts[t.state] || 0) + 1;
  const byState = Object.entries(counts).map(([s, n]) => `${s} ${n}`).join(" · ") || "none";
  const tasks = el("button", { onclick: () => { $("task-framework").value = id; taskOffset = 0; loadTasks(); $("details").close(); } }, "show its tasks");
  const c = completed[id];
  if (c) return [`framework ${c.name}`, [["id", id], ["principal", c.principal], ["role", rolesOf(c)],
    ["registered", when(c.registered_at)], ["status", `completed: removed ${when(c.removed_at)} (${c.removed_why})`],
    ["finished", c.finished_tasks], ["tasks", byState], ["", tasks]]];
  if (!f) return [`framework ${nameOf(id)}`, [["id", id], ["status", "removed"], ["tasks", byState], ["", tasks]]];
  return [`framework ${f.name}`, [
    ["id", id], ["principal", f.principal], ["role", rolesOf(f)], ["weight", f.weight],
    ["registered", when(f.registered_at)],
    ["status", [f.active ? "connected" : "disconnected", f.suppressed && "suppressed"].filter(Boolean).join(", ")],
    ["allocated", res(f.allocated)], ["offered", res(f.offered)],
    ["dominant share", pct(f.dominant_share)], ["fair share", pct(f.fair_share)],
    ["starving", f.starving_seconds != null ? `for ${Math.round(f.starving_seconds)} s` : "no"],
    ["running", f.running_tasks], ["finished", f.finished_tasks], ["tasks", byState],
    ...await whyRows(id), ["", tasks]]];
}

// why it is offered nothing (the master's reasons, the one that explains first), and what
// it was offered lately
async function whyRows(id) {
  let why;
  try { why = await api(`/api/v1/frameworks/${encodeURIComponent(id)}/why`); } catch (e) { return [["why no offers", e.message]]; }
  const figure = (v) => (Array.isArray(v) ? v.join(", ") : v && typeof v === "object"
    ? Object.entries(v).map(([k, x]) => `${k}=${x}`).join(", ") : String(v));
  const reasons = why.reasons.length ? el("ol", { class: "why" }, ...why.reasons.map((r) => el("li", { "data-why": r.code },
    el("b", {}, r.code), " ", r.message,
    el("div", { class: "dim" }, Object.entries(r.numbers).map(([k, v]) => `${k}: ${figure(v)}`).join(" · ")))))
    : "nothing keeps offers from it now";
  const offered = why.offered.length
    ? why.offered.map((o) => `${o.seconds_ago.toFixed(1)} s ago: ${res(o.resources)} of ${o.slave_id}`).join("; ")
    : `nothing in ${why.since ? `the last ${Math.round(why.since)} s` : "any round yet"}`;
  return [["why no offers", reasons], ["offered lately", offered]];
}

async function slaveDetails(id) {
  const page = await api(`/api/v1/slaves?limit=10&search=${encodeURIComponent(id)}`);
  const s = page.slaves.find((x) => x.slave_id === id);
  if (!s) return [`slave ${id}`, [["status", "gone"]]];
  return [`slave ${id}`, [["hostname", s.hostname], ["principal", s.principal], ["total", res(s.total, s.discrete)],
    ["free", res(s.free, s.free_discrete)], ["tasks", s.tasks],
    ["status", [s.connected ? "connected" : "disconnected", maintenance(s)].filter(Boolean).join(", ")],
    ["tenants", s.isolation_warning ? `not isolated: ${s.isolation_warning}` : "isolated"],
    ["attributes", Object.entries(s.attributes || {}).map(([k, v]) => `${k}:${v}`).join(" ") || "none"]]];
}

async function taskDetails(frameworkId, id) {
  const page = await api(`/api/v1/tasks?framework=${encodeURIComponent(frameworkId)}&limit=1000`);
  const t = page.tasks.find((x) => x.task_id === id);
  if (!t) return [`task ${id}`, [["status", "no longer known to the master"]]];
  return [`task ${id}`, [["name", t.name || "-"], ["framework", link(["framework", frameworkId], nameOf(frameworkId))],
    ["slave", link(["slave", t.slave_id], t.slave_id)], ["state", t.state], ["health", health(t) || "-"],
    ["reason", t.reason || "-"],
    ["message", t.message || "-"], ["resources", res(t.resources, t.discrete)],
    ["launched", when(t.launched_at)], ["ended", when(t.ended_at)],
    ["sandbox", el("span", {}, el("button", { onclick: () => showFile(t, "stdout") }, "stdout"), " ",
                   el("button", { onclick: () => showFile(t, "stderr") }, "stderr"))]]];
}

async function openDetails() {
  const [kind, ...ids] = location.hash.slice(1).split("/").map(decodeURIComponent);
  const make = { framework: frameworkDetails, slave: slaveDetails, task: taskDetails }[kind];
  if (!make || !ids.length) return;
  let title, rows;
  try { [title, rows] = await make(...ids); } catch (e) { [title, rows] = [kind, [["error", e.message]]]; }
  $("details-title").textContent = title;
  $("details-list").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  if (!$("details").open) $("details").showModal();
}

window.onhashchange = openDetails;
$("details-close").onclick = () => $("details").close();
$("details").onclose = () => { if (location.hash) history.replaceState(null, "", location.pathname); };

$("slaves-prev").onclick = () => { slaveOffset = Math.max(0, slaveOffset - PAGE); loadSlaves(); };
$("slaves-next").onclick = async () => { slaveOffset += PAGE; if (slaveOffset >= await loadSlaves()) { slaveOffset -= PAGE; loadSlaves(); } };
$("tasks-prev").onclick = () => { taskOffset = Math.max(0, taskOffset - PAGE); loadTasks(); };
$("tasks-next").onclick = async () => { taskOffset += PAGE; if (taskOffset >= await loadTasks()) { taskOffset -= PAGE; loadTasks(); } };
$("task-framework").onchange = $("task-state").onchange = $("task-sort").onchange = () => { taskOffset = 0; loadTasks(); };
$("task-search").oninput = () => { taskOffset = 0; loadTasks(); };
$("slave-search").oninput = () => { slaveOffset = 0; loadSlaves(); };
$("show-completed").onchange = () => render();

let polling = null;
async function start() {
  $("login").hidden = true;
  $("app").hidden = false;
  stream();
  const poll = () => (down ? Promise.resolve() : Promise.all([loadSlaves(), loadTasks(), loadOffers(), loadLimits(), loadHealth(), loadCompleted()]).catch(() => {}));
  await poll();
  if (!polling) polling = setInterval(poll, 2000);
  if (location.hash) openDetails(); // a link to a framework, a slave or a task
}

(async () => {
  try { await api("/api/v1/whoami"); } catch (e) { return; } // 401: the form is shown, with no complaint
  start();
})();
