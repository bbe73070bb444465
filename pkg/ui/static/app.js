// lockstep status page. The key (the master key, or a proxy_admin / proxy_admin_viewer user's
// key) is typed into the page and kept in sessionStorage (this tab only); it is sent in the
// Authorization header, never in a URL. Every value is rendered with textContent.
"use strict";

const KEY = "lockstep.masterKey";
const POLL_MS = 2000;
const HISTORY = 90; // reports kept per replica (3 minutes at one report every 2 s)
const RATE_WINDOW_MS = 60000; // rates are over the reports of the last 60 s
const $ = (id) => document.getElementById(id);
let timer = null;
let generation = 0; // bumps on every connect/forget so an old poll never renders
// history: replica_id → [{at (ms, the replica's report time), p50, p99, samples, requests}]
let history = new Map();

class HTTPError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function getJSON(path, key) {
  const resp = await fetch(path, { headers: { Authorization: "Bearer " + key }, cache: "no-store" });
  let body = null;
  try { body = await resp.json(); } catch (_) { /* not JSON */ }
  if (!resp.ok) {
    const msg = (body && body.error && body.error.message) || (body && body.detail && body.detail.error) || resp.statusText;
    throw new HTTPError(resp.status, msg);
  }
  return body;
}

// cluster returns the /sync/cluster view, or one built from this replica's /sync/lag when the
// cluster view does not exist on this gateway (404) or cannot be read (503: no database, or
// the database is unreachable). db says what the page knows about the database.
async function cluster(key, lag) {
  try {
    const view = await getJSON("/sync/cluster", key);
    return { view, fallback: "", db: { ok: true, text: `reachable (gateway.replicas read by ${lag.replica_id})` } };
  } catch (e) {
    if (!(e instanceof HTTPError) || (e.status !== 404 && e.status !== 503)) throw e;
    const db = e.status === 503
      ? { ok: false, text: `unreachable from ${lag.replica_id}: ${e.message}` }
      : { ok: null, text: "not reported (GET /sync/cluster is not available here)" };
    return {
      fallback: e.status === 503 ? "(this replica only: GET /sync/cluster answered 503)" : "(this replica only: GET /sync/cluster is not available here)",
      db,
      view: {
        converged: lag.state === "streaming",
        max_lag_ms: lag.lag_ms ? lag.lag_ms.p99 : null,
        replicas: [{
          replica_id: lag.replica_id, addr: location.host, source: lag.source, state: lag.state,
          reason: lag.reason, applied: lag.applied_seq, lag_ms: lag.lag_ms,
          heartbeat_age_ms: 0, version: null, started_at: null, stale: false,
          registries: lag.registries, apply_errors: lag.apply_errors,
          db: lag.state === "streaming" || lag.state === "catching_up" || lag.state === "degraded" ? "connected" : "disconnected",
        }],
      },
    };
  }
}

function text(v) {
  if (v === null || v === undefined || v === "") return "—";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(2);
  return String(v);
}

function cell(tr, v, cls) {
  const td = document.createElement("td");
  td.textContent = text(v);
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

// record adds a replica's report to its history when it is a new one (the replica reported
// since the last poll); at is the report's time on this browser's clock.
function record(r, now) {
  const at = now - (r.heartbeat_age_ms || 0);
  let h = history.get(r.replica_id);
  if (!h) { h = []; history.set(r.replica_id, h); }
  const last = h[h.length - 1];
  if (last && Math.abs(at - last.at) < 200) return; // the same report seen again
  const req = r.requests || null;
  if (last && req && last.requests && req.total < last.requests.total) h.length = 0; // restarted
  const l = r.lag_ms || {};
  h.push({ at, p50: l.p50, p99: l.p99, samples: l.samples, requests: req });
  if (h.length > HISTORY) h.splice(0, h.length - HISTORY);
}

// rates returns the replica's {total, errors, limited} per second over its reports of the
// last RATE_WINDOW_MS, or null without two reports at least 1 s apart.
function rates(id) {
  const h = (history.get(id) || []).filter((s) => s.requests);
  if (h.length < 2) return null;
  const last = h[h.length - 1];
  const first = h.find((s) => last.at - s.at <= RATE_WINDOW_MS) || h[0];
  const dt = (last.at - first.at) / 1000;
  if (dt < 1) return null;
  const d = (k) => Math.max(0, (last.requests[k] || 0) - (first.requests[k] || 0)) / dt;
  return { total: d("total"), errors: d("client_errors") + d("server_errors"), limited: d("rate_limited") };
}

function rate(v) { return v === null || v === undefined ? "—" : v.toFixed(2); }

// lagCell shows a lag percentile, or "no samples" when the replica applied no change in the
// last 60 s (its p50/p99 are then 0 without meaning 0 ms).
function lagCell(tr, r, k) {
  const l = r.lag_ms;
  if (l && l.samples === 0) return cell(tr, "no samples", "lag-" + k + " muted");
  return cell(tr, l ? l[k] : null, "lag-" + k);
}

// chart draws the replica's lag p99 history as an inline SVG polyline (no external assets).
function chart(id) {
  const td = document.createElement("td");
  td.className = "lag-chart";
  const pts = (history.get(id) || []).filter((s) => s.samples > 0 && typeof s.p99 === "number");
  td.dataset.points = String(pts.length);
  if (pts.length === 0) {
    td.textContent = "no samples";
    td.classList.add("muted");
    return td;
  }
  const W = 160, H = 32; // the template's viewBox
  const max = Math.max(1, ...pts.map((s) => s.p99));
  const t0 = pts[0].at, t1 = pts[pts.length - 1].at;
  const span = Math.max(1, t1 - t0);
  // the SVG elements come from the page's <template> (parsed as SVG there: no namespace here)
  const svg = $("chart-template").content.firstElementChild.cloneNode(true);
  svg.querySelector("title").textContent = `lag p99 over ${pts.length} report(s): max ${max.toFixed(2)} ms`;
  const line = svg.querySelector("polyline");
  const y = (s) => (H - 2 - (s.p99 / max) * (H - 4)).toFixed(1);
  // one report: a level segment across the chart, so a single sample is visible
  const xy = pts.length === 1 ? [`2,${y(pts[0])}`, `${W - 2},${y(pts[0])}`]
    : pts.map((s) => `${(((s.at - t0) / span) * (W - 4) + 2).toFixed(1)},${y(s)}`);
  line.setAttribute("points", xy.join(" "));
  td.appendChild(svg);
  const label = document.createElement("span");
  label.className = "chart-max muted";
  label.textContent = ` max ${max.toFixed(1)}`;
  td.appendChild(label);
  return td;
}

function sortedReplicas(view) {
  return (view.replicas || []).slice().sort((a, b) => String(a.replica_id).localeCompare(String(b.replica_id)));
}

function renderReplicas(view, c) {
  const now = Date.now();
  const list = sortedReplicas(view);
  for (const r of list) record(r, now);
  for (const id of [...history.keys()]) if (!list.some((r) => r.replica_id === id)) history.delete(id);
  const sum = { total: 0, errors: 0, limited: 0, any: false };
  const rows = list.map((r) => {
    const tr = document.createElement("tr");
    tr.dataset.replicaId = r.replica_id;
    if (r.stale) tr.className = "stale";
    cell(tr, r.replica_id);
    cell(tr, r.addr);
    cell(tr, r.source);
    // a stale replica's state is never shown as its last (possibly green) state
    const st = cell(tr, r.stale ? "stale" : r.state, "state");
    const badge = r.stale ? "stale" : r.state;
    st.dataset.state = badge;
    st.classList.add("state-" + badge);
    st.title = r.stale ? `no report for ${text(r.heartbeat_age_ms)} ms; last reported ${r.state}` : (r.reason || "");
    const db = cell(tr, r.db, "db");
    db.dataset.state = r.db || "";
    cell(tr, r.applied, "applied");
    lagCell(tr, r, "p50");
    lagCell(tr, r, "p99");
    tr.appendChild(chart(r.replica_id));
    const rt = r.stale ? null : rates(r.replica_id);
    if (rt) { sum.total += rt.total; sum.errors += rt.errors; sum.limited += rt.limited; sum.any = true; }
    cell(tr, rate(rt && rt.total), "rate-total");
    cell(tr, rate(rt && rt.errors), "rate-errors");
    cell(tr, rate(rt && rt.limited), "rate-429");
    cell(tr, r.heartbeat_age_ms);
    cell(tr, r.version);
    cell(tr, r.started_at ? String(r.started_at).replace("T", " ").replace(/\.[0-9]+/, "") : null, "started");
    return tr;
  });
  $("replicas").querySelector("tbody").replaceChildren(...rows);
  $("cluster-source").textContent = c.fallback || "(GET /sync/cluster)";
  $("rate-total").textContent = sum.any ? rate(sum.total) : "— (needs two reports)";
  $("rate-errors").textContent = sum.any ? rate(sum.errors) : "—";
  $("rate-429").textContent = sum.any ? rate(sum.limited) : "—";
  $("db").textContent = c.db.text;
  $("db").dataset.state = c.db.ok === true ? "ok" : c.db.ok === false ? "down" : "unknown";

  // the badge: stale (red) when any replica is, else converged (green) or not converged
  const stale = list.filter((r) => r.stale).map((r) => r.replica_id);
  const state = stale.length ? "stale" : view.converged ? "converged" : "not-converged";
  const badge = $("badge");
  badge.hidden = false;
  badge.dataset.state = state;
  badge.className = "badge badge-" + state;
  badge.textContent = stale.length ? `not converged · stale: ${stale.join(", ")}` : view.converged ? "converged" : "not converged";
  const n = list.length;
  $("summary").textContent = `${n} replica${n === 1 ? "" : "s"} · max lag ${text(view.max_lag_ms)} ms`;

  const versions = [...new Set(list.map((r) => r.version).filter((v) => v))];
  const ver = $("version");
  ver.className = versions.length > 1 ? "warn" : "muted";
  ver.textContent = versions.length === 0 ? "" : versions.length === 1 ? `version ${versions[0]}`
    : "versions differ: " + list.map((r) => `${r.replica_id} ${text(r.version)}`).join(", ");
  renderByReplica(list);
}

// renderByReplica shows every replica's registry counts and apply_errors side by side: a
// count below the row's highest is marked behind, a non-zero apply_errors is marked.
function renderByReplica(list) {
  const head = document.createElement("tr");
  const th = document.createElement("th");
  th.textContent = "registry";
  head.appendChild(th);
  for (const r of list) {
    const h = document.createElement("th");
    h.textContent = r.replica_id + (r.stale ? " (stale)" : "");
    h.dataset.replicaId = r.replica_id;
    head.appendChild(h);
  }
  $("by-replica").querySelector("thead").replaceChildren(head);
  const names = [...new Set(list.flatMap((r) => Object.keys(r.registries || {})))].sort();
  const rows = names.map((name) => {
    const tr = document.createElement("tr");
    tr.dataset.registry = name;
    cell(tr, name);
    const vals = list.map((r) => (r.registries && r.registries[name] ? r.registries[name].count : null));
    const known = vals.filter((v) => v !== null);
    const max = known.length ? Math.max(...known) : null;
    if (new Set(known).size > 1) tr.classList.add("differs");
    list.forEach((r, i) => {
      const td = cell(tr, vals[i], "count");
      td.dataset.replicaId = r.replica_id;
      if (vals[i] !== null && vals[i] < max) { td.classList.add("behind"); td.title = `${max - vals[i]} behind the highest (${max})`; }
    });
    return tr;
  });
  const errs = document.createElement("tr");
  errs.dataset.registry = "apply_errors";
  cell(errs, "apply_errors");
  for (const r of list) {
    const td = cell(errs, r.apply_errors, "count");
    td.dataset.replicaId = r.replica_id;
    if (r.apply_errors > 0) { td.classList.add("bad"); td.title = "change-feed rows this replica could not apply (see its log)"; }
  }
  rows.push(errs);
  $("by-replica").querySelector("tbody").replaceChildren(...rows);
}

function renderCooldowns(lag) {
  let rows;
  if (!Array.isArray(lag.cooldowns)) {
    const tr = document.createElement("tr");
    const td = cell(tr, "not reported by this gateway (no cooldowns in GET /sync/lag)", "muted");
    td.colSpan = 3;
    rows = [tr];
  } else if (lag.cooldowns.length === 0) {
    const tr = document.createElement("tr");
    const td = cell(tr, "none", "muted");
    td.colSpan = 3;
    rows = [tr];
  } else {
    rows = lag.cooldowns.map((c) => {
      const tr = document.createElement("tr");
      tr.dataset.modelId = c.model_id;
      cell(tr, c.model_id);
      cell(tr, c.until);
      cell(tr, c.reason);
      return tr;
    });
  }
  $("cooldowns").querySelector("tbody").replaceChildren(...rows);
}

function renderSelf(lag) {
  $("self-id").textContent = lag.replica_id;
  const l = lag.lag_ms || {};
  const lagText = l.samples === 0 ? "no samples (no change applied in the last 60 s)"
    : `${text(l.last)} / ${text(l.p50)} / ${text(l.p99)} / ${text(l.max)} (${text(l.samples)} samples, 60 s)`;
  const fields = [
    ["state", lag.state], ["reason", lag.reason], ["source", lag.source],
    ["applied_seq / head_seq", `${text(lag.applied_seq)} / ${text(lag.head_seq)}`],
    ["lag ms last / p50 / p99 / max", lagText],
    ["heartbeat_rtt_ms", lag.heartbeat_rtt_ms], ["events_applied", lag.events_applied],
    ["apply_errors", lag.apply_errors], ["reconnects", lag.reconnects],
    ["gaps_repaired", lag.gaps_repaired], ["drift_repaired", lag.drift_repaired],
  ];
  const out = [];
  for (const [k, v] of fields) {
    if (k === "reason" && !v) continue;
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = text(v);
    dd.dataset.field = k;
    out.push(dt, dd);
  }
  $("self").replaceChildren(...out);

  const regs = lag.registries || {};
  const rt = lag.read_through || {};
  const names = [...new Set([...Object.keys(regs), ...Object.keys(rt)])].sort();
  const rows = names.map((name) => {
    const tr = document.createElement("tr");
    tr.dataset.registry = name;
    const r = rt[name] || {};
    cell(tr, name);
    cell(tr, regs[name] ? regs[name].count : null);
    for (const k of ["attempts", "found", "not_found", "negative_hits", "budget_exhausted", "errors"]) cell(tr, r[k]);
    return tr;
  });
  $("registries").querySelector("tbody").replaceChildren(...rows);
  renderCooldowns(lag);
}

function showError(msg) {
  $("error").textContent = msg;
  $("error").hidden = !msg;
}

function showLogin(msg) {
  stop();
  $("status").hidden = true;
  $("forget").hidden = true;
  $("badge").hidden = true;
  $("login").hidden = false;
  $("summary").textContent = "not connected";
  $("version").textContent = "";
  showError(msg || "");
}

function stop() {
  generation++;
  history = new Map();
  if (timer) clearTimeout(timer);
  timer = null;
}

async function poll(gen) {
  const key = sessionStorage.getItem(KEY);
  if (!key || gen !== generation) return;
  try {
    const lag = await getJSON("/sync/lag", key);
    const c = await cluster(key, lag);
    if (gen !== generation) return;
    renderReplicas(c.view, c);
    renderSelf(lag);
    $("updated").textContent = new Date().toLocaleTimeString();
    $("status").hidden = false;
    showError("");
  } catch (e) {
    if (gen !== generation) return;
    if (e instanceof HTTPError && (e.status === 401 || e.status === 403)) {
      sessionStorage.removeItem(KEY);
      showLogin(`The gateway refused the key (${e.status}): ${e.message}`);
      return;
    }
    showError(`Refresh failed: ${e.message}. Retrying…`);
  }
  if (gen === generation) timer = setTimeout(() => poll(gen), POLL_MS);
}

function start() {
  stop();
  $("login").hidden = true;
  $("forget").hidden = false;
  poll(generation);
}

document.addEventListener("DOMContentLoaded", () => {
  $("login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const key = $("key").value.trim();
    $("key").value = "";
    if (!key) return;
    sessionStorage.setItem(KEY, key);
    start();
  });
  $("forget").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    showLogin("");
  });
  if (sessionStorage.getItem(KEY)) start();
});
