"""The operator console's page: plain HTML and JavaScript, no external files (served by robopin.trials.console)."""

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{TITLE}}</title>
<style>
body { font-family: sans-serif; margin: 0; color: #222; }
header { background: #24292f; color: #fff; padding: 8px 14px; display: flex; gap: 16px; align-items: center; }
header h1 { font-size: 17px; margin: 0; flex: 1; }
#stop { background: #c62828; color: #fff; font-size: 20px; font-weight: bold; border: 0;
        padding: 10px 28px; border-radius: 6px; cursor: pointer; }
main { display: grid; grid-template-columns: minmax(0, 3fr) minmax(320px, 2fr); gap: 12px; padding: 12px; }
.views { display: flex; flex-wrap: wrap; gap: 8px; }
figure { margin: 0; } figure img { width: 320px; height: 240px; object-fit: contain; background: #111; }
/* The pinned views at their own size (640x480 from the shipped cameras): their ID labels are drawn for it. */
figure.reasoning { order: -1; } figure.reasoning img { width: 640px; height: auto; max-width: 100%;
  aspect-ratio: 4 / 3; }
figcaption { font-size: 12px; color: #555; }
section { border: 1px solid #ccc; border-radius: 6px; padding: 8px 10px; margin-bottom: 10px; }
h2 { font-size: 15px; margin: 2px 0 8px; }
#message { min-height: 1.3em; font-weight: bold; } .error { color: #b42318; } .ok { color: #1a7f37; }
.warn { color: #9a6700; } #message.error { background: #ffebe9; border: 2px solid #b42318; padding: 6px; }
#stage.error { color: #b42318; } #stage.ok { color: #1a7f37; } #stage.warn { color: #9a6700; }
#batch-end { font-weight: bold; font-size: 16px; }
table { border-collapse: collapse; font-size: 13px; } td, th { border: 1px solid #bbb; padding: 2px 6px; }
button { font-size: 14px; padding: 5px 12px; margin: 2px; }
#success { background: #1a7f37; color: #fff; } #failure { background: #b42318; color: #fff; }
#seat { font-size: 13px; } .muted { color: #666; font-size: 12px; } textarea { width: 100%; }
#stage { font-size: 18px; font-weight: bold; } textarea:disabled { background: #eee; }
</style></head><body>
<header><h1>{{TITLE}}</h1><span id="seat"></span><button id="takeover" hidden>take the operator's seat</button>
<button id="stop" title="cancel the running task and stop the arm">STOP</button></header>
<main>
<div>
 <section><h2>Task</h2><div id="stage">idle</div><div id="detail" class="muted"></div></section>
 <section><h2>Views</h2><div class="views" id="views"><span class="muted">no images yet</span></div></section>
</div>
<div>
 <div id="message"></div>
 <section id="scene" hidden><h2>Set up the scene: <span id="scene-trial"></span></h2>
  <p id="scene-instruction"></p><p><button id="scene-ready">scene ready</button>
  <span class="muted">when the scene looks as below</span></p>
  <p id="scene-description" class="muted"></p><ul id="scene-setup"></ul>
  <figure id="scene-figure" hidden><img id="scene-reference" alt="reference picture"/>
   <figcaption id="scene-caption"></figcaption></figure></section>
 <section id="judge" hidden><h2>Judge trial <span id="judge-trial"></span></h2>
  <p id="judge-instruction"></p>
  <p>The stack says: <b id="judge-stack"></b> <span id="judge-detail" class="muted"></span></p>
  <p id="subgoals-row" hidden>sub-goals reached: <input id="subgoals" type="number" min="0" style="width:4em"/>
   of <span id="subgoals-total"></span></p>
  <p><button id="success">success</button></p>
  <p><select id="reason"></select> <input id="note" placeholder="note (needed for other)" size="28"/>
   <button id="failure">failure</button></p></section>
 <section><h2>Instruction</h2>
  <textarea id="instruction" rows="2" placeholder="put the duck in front of two toys on the red plate"></textarea>
  <label><input type="checkbox" id="dry-run"/> dry run</label> <button id="send">send</button>
  <span id="instruction-count" class="muted"></span> <span id="instruction-why" class="muted"></span></section>
 <section><h2>Batch</h2><div id="batch-end"></div>
  <table id="batch"><tr><th>trial</th><th>task</th><th>judgement</th><th>stack</th></tr></table>
  <div id="counts" class="muted"></div><div id="log" class="muted"></div></section>
</div></main>
<script>
"use strict";
let token = sessionStorage.getItem("robopin-operator-token") || "";
let pendingKey = "", lastSeq = {}, reasonsFilled = false, ended = false;
const $ = (id) => document.getElementById(id);
// kind: true or "ok" (green), false or "error" (red), "warn" (amber)
function say(text, kind) {
  const m = $("message"); m.textContent = text;
  m.className = kind === true || kind === "ok" ? "ok" : kind === "warn" ? "warn" : text ? "error" : "";
}
async function call(path, body) {
  let response;
  try {
    response = await fetch(path, {method: "POST", headers: {"Content-Type": "application/json",
      "X-Operator-Token": token}, body: JSON.stringify(body || {})});
  } catch (e) { say("the console server does not answer: " + e, false); return null; }
  const data = await response.json().catch(() => ({error: "bad_answer", message: "no JSON answer"}));
  if (!response.ok) { say(data.message || data.error, false); return null; }
  // An answer that says it did not work ({ok: false}, {accepted: false}) is an error, not a success.
  if (data.message) say(data.message, data.ok !== false && data.accepted !== false);
  return data;
}
const RUNNING = ["accepted", "executing", "canceling"];
function renderTask(t) {
  const stage = $("stage"), where = t.stage ? t.stage + (t.step !== undefined ? " (step " + t.step + ")" : "") : "";
  const r = t.result;
  let text = where || "idle", kind = "", detail = t.detail || "";
  if (t.status === "canceling") { text = "canceling" + (where ? " (was " + where + ")" : ""); kind = "warn"; }
  else if (t.status === "canceled") {
    text = "canceled" + (where ? " at " + where : ""); kind = "warn"; detail = r ? r.message : detail;
  } else if (t.status === "aborted") {
    text = "failed" + (r && r.reason ? ": " + r.reason : ""); kind = "error"; detail = r ? r.message : detail;
  } else if (t.status === "succeeded") {
    text = r && !r.success ? "failed" + (r.reason ? ": " + r.reason : "") : "succeeded";
    kind = r && !r.success ? "error" : "ok"; detail = r ? r.message : detail;
  }
  stage.textContent = text; stage.className = kind;
  $("detail").textContent = (t.task_id ? "task " + t.task_id + " · " : "") + (t.status || "") + " " + (detail || "");
  return RUNNING.includes(t.status);
}
function renderControls(s, taskRunning) {
  const b = s.batch, limit = (s.limits || {}).instruction_chars || 0, box = $("instruction");
  if (limit && box.maxLength !== limit) box.maxLength = limit;
  let why = "", busy = false;
  if (ended) why = "the batch has ended";
  else if (b && (b.pending || b.phase !== "idle")) why = "a trial is on: the batch gives its instruction";
  else if (!s.operator) why = "this page watches: another page is the operator";
  else if (taskRunning) { why = "a task is running (STOP cancels it)"; busy = true; }
  box.disabled = $("dry-run").disabled = !!why && !busy;  // while a task runs, the next one may be typed
  $("send").disabled = !!why;
  $("instruction-why").textContent = why;
  $("instruction-count").textContent = limit ? box.value.trim().length + " / " + limit : "";
}
async function claim(force) {
  const response = await fetch("/api/claim", {method: "POST", headers: {"Content-Type": "application/json",
    "X-Operator-Token": token}, body: JSON.stringify({force: !!force})});
  const data = await response.json();
  if (response.ok) { token = data.token; sessionStorage.setItem("robopin-operator-token", token); say("", true); }
  else { say(data.message, false); }
}
function renderViews(views) {
  const box = $("views");
  if (!views.length) return;
  if (box.querySelector(".muted")) box.innerHTML = "";
  for (const v of views) {
    const key = v.kind + "/" + v.name;
    let img = document.getElementById("view-" + v.kind + "-" + v.name);
    if (!img) {
      const fig = document.createElement("figure"); fig.className = v.kind;
      img = document.createElement("img"); img.id = "view-" + v.kind + "-" + v.name; img.dataset.seq = "0";
      const cap = document.createElement("figcaption");
      cap.textContent = (v.kind === "reasoning" ? "pinned reasoning: " : "camera: ") + v.name;
      fig.append(img, cap); box.append(fig);
    }
    if (lastSeq[key] !== v.seq) {
      lastSeq[key] = v.seq;
      const next = new Image();
      next.onload = () => { img.src = next.src; img.dataset.seq = String(v.seq); };
      next.src = "/api/view/" + key + ".png?seq=" + v.seq;
    }
  }
}
function renderBatch(batch) {
  const scene = $("scene"), judge = $("judge");
  if (!batch) { scene.hidden = judge.hidden = true; return; }
  if (!reasonsFilled) {
    const none = document.createElement("option"); none.value = ""; none.textContent = "— failure reason —";
    $("reason").append(none);
    for (const [name, text] of Object.entries(batch.reasons)) {
      const o = document.createElement("option"); o.value = name; o.textContent = name; o.title = text;
      $("reason").append(o);
    }
    reasonsFilled = true;
  }
  const p = batch.pending, key = p ? p.kind + ":" + p.trial_id : "";
  scene.hidden = !(p && p.kind === "scene"); judge.hidden = !(p && p.kind === "judgement");
  if (key !== pendingKey && p) {
    if (p.kind === "scene") {
      $("scene-trial").textContent = p.trial_id + " (" + p.task + ")";
      $("scene-instruction").textContent = p.instruction; $("scene-description").textContent = p.description;
      $("scene-setup").innerHTML = "";
      for (const [thing, place] of p.setup) {
        const li = document.createElement("li"); li.textContent = thing + ": " + place; $("scene-setup").append(li);
      }
      $("scene-figure").hidden = !p.reference;
      if (p.reference) { $("scene-reference").src = "/api/reference.png?t=" + Date.now();
                         $("scene-caption").textContent = p.reference_caption; }
    } else {
      $("judge-trial").textContent = p.trial_id + " (" + p.task + ")";
      $("judge-instruction").textContent = p.instruction;
      $("judge-stack").textContent = p.stack.success ? "success" : "failure (" + p.stack.failure + ")";
      $("subgoals-row").hidden = !(p.subgoals_total > 1);
      $("subgoals-total").textContent = p.subgoals_total || "";
      $("subgoals").value = ""; $("note").value = ""; $("reason").value = "";
      $("judge-detail").textContent = p.stack.detail || "";
    }
  }
  pendingKey = key;
  const table = $("batch");
  while (table.rows.length > 1) table.deleteRow(1);
  const counts = {};
  for (const r of batch.rows) {
    const row = table.insertRow();
    row.id = "row-" + r.trial_id;
    for (const text of [r.trial_id, r.task, r.judgement, r.stack]) row.insertCell().textContent = text;
    const c = counts[r.task] = counts[r.task] || [0, 0]; c[0] += r.success ? 1 : 0; c[1] += 1;
  }
  $("counts").textContent = Object.entries(counts).map(([t, c]) => t + " " + c[0] + "/" + c[1]).join(" · ");
  $("log").textContent = batch.messages.slice(-4).join(" | ");
  if (batch.closed) endBatch(batch);
}
function endBatch(batch) {
  // The batch is over: nothing more will be asked, and its server stops right after.
  ended = true;
  $("scene").hidden = $("judge").hidden = true;
  const stopped = !!batch.pending || batch.phase !== "idle" || !batch.rows.length;
  const text = stopped ? "batch stopped" + (batch.trial_id ? " at trial " + batch.trial_id : "")
                         + " (what it recorded is kept; continue it with --resume)"
                       : "batch complete: " + batch.rows.length + " trial(s) judged";
  $("batch-end").textContent = text; $("batch-end").className = stopped ? "warn" : "ok";
  say(text + "; the console has closed, the table below is final", stopped ? "warn" : true);
  $("stop").disabled = true; $("takeover").hidden = true;
}
async function poll() {
  try {
    const response = await fetch("/api/state", {headers: {"X-Operator-Token": token}});
    const s = await response.json();
    $("seat").textContent = s.operator ? "you are the operator"
      : (s.seat_held ? "watching: another page is the operator" : "no operator page");
    $("takeover").hidden = s.operator;
    if (!s.operator && !s.seat_held && !(s.batch && s.batch.closed)) await claim(false);
    const running = renderTask(s.task || {});
    renderViews(s.views); renderBatch(s.batch); renderControls(s, running);
    document.body.dataset.version = String(s.batch ? s.batch.version : 0);
  } catch (e) {
    if (ended) return;  // the batch ended and its server with it: the page keeps its final table
    say("the console server does not answer: " + e, false);
  }
  if (!ended) setTimeout(poll, 400);
}
$("stop").onclick = () => call("/api/stop");  // {ok: false}: no stack confirmed the stop, shown in red
$("instruction").oninput = () => {
  const box = $("instruction"); $("instruction-count").textContent = box.value.trim().length + " / " + box.maxLength;
};
$("takeover").onclick = () => claim(true);
$("send").onclick = () => call("/api/instruct", {instruction: $("instruction").value, dry_run: $("dry-run").checked});
$("scene-ready").onclick = () => call("/api/scene_ready", {trial_id: pendingKey.split(":")[1]});
function subgoals() { const v = $("subgoals").value; return v === "" ? null : Number(v); }
$("success").onclick = () => call("/api/judge", {trial_id: pendingKey.split(":")[1], success: true,
  note: $("note").value, subgoals: subgoals()});
$("failure").onclick = () => call("/api/judge", {trial_id: pendingKey.split(":")[1], success: false,
  reason: $("reason").value, note: $("note").value, subgoals: subgoals()});
window.addEventListener("pagehide", () => {
  navigator.sendBeacon("/api/release", new Blob([JSON.stringify({token: token})], {type: "application/json"}));
});
claim(false).then(poll);
</script></body></html>
"""
