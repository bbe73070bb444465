// lockstep status page. The master key is typed into the page and kept in sessionStorage
// (this tab only); it is sent in the Authorization header, never in a URL.
"use strict";

const KEY = "lockstep.masterKey";
const POLL_MS = 2000;
const $ = (id) => document.getElementById(id);
let timer = null;
let generation = 0; // bumps on every connect/forget so an old poll never renders

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
// cluster view does not exist on this gateway (404).
async function cluster(key, lag) {
  try {
    return { view: await getJSON("/sync/cluster", key), fallback: false };
  } catch (e) {
    if (!(e instanceof HTTPError) || e.status !== 404) throw e;
  }
  return {
    fallback: true,
    view: {
      converged: lag.state === "streaming",
      max_lag_ms: lag.lag_ms ? lag.lag_ms.p99 : null,
      replicas: [{
        replica_id: lag.replica_id, addr: location.host, source: lag.source, state: lag.state,
        reason: lag.reason, applied: lag.applied_seq, lag_ms: lag.lag_ms,
        heartbeat_age_ms: null, version: null, started_at: null, stale: false,
      }],
    },
  };
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

function renderReplicas(view, fallback) {
  const tbody = $("replicas").querySelector("tbody");
  const rows = [];
  const list = (view.replicas || []).slice().sort((a, b) => String(a.replica_id).localeCompare(String(b.replica_id)));
  for (const r of list) {
    const tr = document.createElement("tr");
    tr.dataset.replicaId = r.replica_id;
    if (r.stale) tr.className = "stale";
    cell(tr, r.replica_id);
    cell(tr, r.addr);
    cell(tr, r.source);
    const st = cell(tr, r.stale ? r.state + " (stale)" : r.state, "state state-" + r.state);
    if (r.reason) st.title = r.reason;
    cell(tr, r.applied);
    cell(tr, r.lag_ms ? r.lag_ms.p50 : null, "lag-p50");
    cell(tr, r.lag_ms ? r.lag_ms.p99 : null, "lag-p99");
    cell(tr, r.heartbeat_age_ms);
    cell(tr, r.version);
    cell(tr, r.started_at);
    rows.push(tr);
  }
  tbody.replaceChildren(...rows);
  $("cluster-source").textContent = fallback
    ? "(this replica only: GET /sync/cluster is not available here)"
    : "(GET /sync/cluster)";
  const n = list.length;
  $("summary").textContent = `${n} replica${n === 1 ? "" : "s"} · ` +
    (view.converged ? "converged" : "not converged") + ` · max lag ${text(view.max_lag_ms)} ms`;
}

function renderSelf(lag) {
  $("self-id").textContent = lag.replica_id;
  const l = lag.lag_ms || {};
  const fields = [
    ["state", lag.state], ["reason", lag.reason], ["source", lag.source],
    ["applied_seq / head_seq", `${text(lag.applied_seq)} / ${text(lag.head_seq)}`],
    ["lag ms last / p50 / p99 / max", `${text(l.last)} / ${text(l.p50)} / ${text(l.p99)} / ${text(l.max)} (${text(l.samples)} samples, 60 s)`],
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

  const cds = (lag.cooldowns || []).map((c) => {
    const tr = document.createElement("tr");
    tr.dataset.modelId = c.model_id;
    cell(tr, c.model_id);
    cell(tr, c.until);
    cell(tr, c.reason);
    return tr;
  });
  if (cds.length === 0) {
    const tr = document.createElement("tr");
    const td = cell(tr, "none", "muted");
    td.colSpan = 3;
    cds.push(tr);
  }
  $("cooldowns").querySelector("tbody").replaceChildren(...cds);
}

function showError(msg) {
  $("error").textContent = msg;
  $("error").hidden = !msg;
}

function showLogin(msg) {
  stop();
  $("status").hidden = true;
  $("forget").hidden = true;
  $("login").hidden = false;
  $("summary").textContent = "not connected";
  showError(msg || "");
}

function stop() {
  generation++;
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
    renderReplicas(c.view, c.fallback);
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
