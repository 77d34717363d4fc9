// rolecall web view: live updates and the message box. The pages read without it.
"use strict";

(function () {
  const page = document.getElementById("session") || document.getElementById("flowpage");
  if (!page) return;
  const sid = page.dataset.session;
  if (!sid) return;
  const thread = document.getElementById("thread");
  const statusEl = document.getElementById("status");
  const stepEl = document.getElementById("step");
  const thinking = document.getElementById("thinking");
  const detailEl = document.getElementById("detail");
  const streaming = new Map(); // message id -> element being streamed
  let names = {};
  try { names = JSON.parse(page.dataset.names || "{}"); } catch (e) { names = {}; }
  let stopDetail = "";
  // audiences.md: the page may show the session as one role saw it (?as=ROLE)
  const seenBy = page.dataset.seenBy || "";
  function unseen(ev) {
    return Boolean(seenBy && ev.audience && ev.sender !== seenBy && !ev.audience.includes(seenBy));
  }
  function privateMark(ev) {
    const mark = document.createElement("span");
    mark.className = "private"; mark.title = "only they and the human see it";
    mark.textContent = "to " + ev.audience.join(", ") + " only";
    return mark;
  }

  function text(el, value) { if (el) el.textContent = value; }
  function nameOf(id) { return names[id] || id; }

  function where(ev) {
    return "step " + ev.step_id + (ev.loop_iteration ? " · loop " + ev.loop_iteration : "");
  }

  // a message's element, placed where the event comes: the thread keeps the events' order
  // whatever the order in which the server's rendering of each message arrives
  // who chose the next speaker and why (system/selection), shown on its line until the
  // server renders the finished message with it (as web/asides.py words it)
  const chosenFor = new Map();
  function chosenNote(ev) {
    const said = ev.answer ? ' ("' + ev.answer.replace(/\s+/g, " ").slice(0, 40) + '")' : "";
    if (ev.by === "model") return "chosen by the selector" + said;
    if (ev.by === "fallback") return ev.model ? "chosen by fallback: the selector named no candidate" + said : "chosen by fallback (next in role order)";
    if (ev.by === "mention") return "chosen by mention";
    if (ev.by === "random") return "chosen at random";
    return "chosen in turn (round_robin)";
  }

  function placeholder(ev) {
    const empty = document.getElementById("no-messages");
    if (empty) empty.remove();
    const art = document.createElement("article");
    art.className = "message";
    art.id = ev.message_id;
    art.dataset.sender = ev.sender;
    const head = document.createElement("header");
    const mid = document.createElement("a");
    mid.className = "mid"; mid.href = "#" + ev.message_id; mid.textContent = ev.message_id;
    const who = document.createElement("span");
    who.className = "who"; who.textContent = nameOf(ev.sender);
    head.append(mid, " ", who);
    if (nameOf(ev.sender) !== ev.sender) {
      const rid = document.createElement("span");
      rid.className = "rid"; rid.textContent = "@" + ev.sender;
      head.append(" ", rid);
    }
    if (ev.audience) head.append(" ", privateMark(ev));
    const why = chosenFor.get(ev.sender);
    if (why) { chosenFor.delete(ev.sender); head.append(" ", span("chosen", why)); }
    if (ev.step_id) {
      const at = document.createElement("span");
      at.className = "where";
      at.textContent = ev.step_id === "interjection" ? "interjection" : where(ev);
      head.append(" ", at);
    }
    const body = document.createElement("div");
    body.className = "body";
    art.append(head, body);
    thread.append(art);
    return art;
  }

  // Retry forks and asks again: offered only while no turn runs and no call waits (the
  // server answers 409 then); the server's "rest" events say when that is
  let busyNow = page.dataset.busy === "yes";
  function showRetry() {
    if (!thread) return;
    thread.querySelectorAll("form.retry").forEach((f) => { f.hidden = busyNow; });
  }
  function turnBegins() { busyNow = true; showRetry(); }

  // the execution log (flows.md): a row per step as it is recorded, once each (a page
  // that joined mid-stream replays some it already shows)
  function stepDone(ev) {
    const rows = document.getElementById("log-rows");
    if (!rows || rows.querySelector('tr[data-order="' + ev.execution_order + '"]')) return;
    const tr = document.createElement("tr");
    tr.dataset.order = String(ev.execution_order);
    const cells = [String(ev.execution_order), "step " + ev.step_id, nameOf(ev.speaker), "",
      ev.loop_iteration ? "loop " + ev.loop_iteration : "", ev.result,
      "↑" + (ev.input_tokens || 0) + " ↓" + (ev.output_tokens || 0)];
    cells.forEach((value, i) => {
      const td = document.createElement("td");
      if (i === 3 && ev.message_id) {
        const a = document.createElement("a");
        a.href = "#" + ev.message_id; a.textContent = ev.message_id;
        td.append(a);
      } else td.textContent = value;
      tr.append(td);
    });
    rows.append(tr);
    const n = rows.children.length;
    text(document.getElementById("log-count"), n + (n === 1 ? " step" : " steps"));
    const log = document.getElementById("log");
    if (log) log.hidden = false;
  }

  // what a session this server runs does now: a turn, a call waiting, a chat waiting for you
  let restStatus = "";
  function rest(state) {
    busyNow = !!state.busy;
    restStatus = state.status || "";
    showRetry();
    if (!/^(finished|paused)/.test(page.dataset.status || "")) {
      text(statusEl, state.status || "running");
      text(detailEl, state.status || "running");
    }
    if (thinking && state.status === "waiting for you") thinking.hidden = true;
  }

  function streamStart(ev) {
    turnBegins();
    if (ev.step_id && ev.step_id !== "interjection") {
      text(stepEl, where(ev)); // the step running now
      highlight(document.getElementById("node-" + ev.step_id));
    }
    if (!thread || document.getElementById(ev.message_id) || unseen(ev)) return;
    const art = placeholder(ev);
    art.classList.add("streaming");
    art.setAttribute("aria-busy", "true"); // read out once complete, not word by word
    const body = art.querySelector(".body");
    body.classList.add("live-text");
    streaming.set(ev.message_id, body);
    if (thinking) { thinking.hidden = false; thinking.textContent = nameOf(ev.sender) + " is thinking…"; }
  }

  function streamChunk(ev) {
    const body = streaming.get(ev.message_id);
    if (body) body.append(document.createTextNode(ev.delta));
    if (thinking) thinking.textContent = nameOf(ev.sender) + " is writing…";
  }

  // reply hygiene (real-models.md): text streamed and then cut from the reply is struck
  // through while the reply streams; the finished message (rendered by the server) says
  // how much was shown and cut, on this page only (a stored message is only the message)
  const cutShown = new Map();
  function streamTrim(ev) {
    const body = streaming.get(ev.message_id);
    if (!body || !ev.shown) return;
    const all = body.textContent;
    const keep = all.slice(0, Math.max(0, all.length - ev.shown));
    body.textContent = keep;
    const struck = document.createElement("del");
    struck.className = "cut";
    struck.title = "cut (" + ev.kind + "): not part of the message";
    struck.textContent = all.slice(keep.length);
    body.append(struck);
    cutShown.set(ev.message_id, ev);
  }
  function cutNote(id) {
    const ev = cutShown.get(id);
    const art = document.getElementById(id);
    const head = art && art.querySelector("header");
    if (!ev || !head) return;
    cutShown.delete(id);
    const note = document.createElement("span");
    note.className = "where cut-note";
    const what = ev.kind === "repetition" ? "repeated text" : ev.kind === "other_speaker" ? "another participant's turn" : ev.kind;
    note.textContent = "✂ " + ev.shown + " characters shown while streaming were cut (" + what + ")";
    head.append(" ", note);
  }

  // a cancelled or failed generation: its element becomes the draft it is kept as and
  // gives up the message id, which the next message takes ([mN] names one message)
  function streamError(ev) {
    streaming.delete(ev.message_id);
    if (thinking) thinking.hidden = true;
    const art = document.getElementById(ev.message_id);
    if (!art || !art.classList.contains("streaming")) return;
    art.removeAttribute("id");
    art.classList.remove("streaming");
    art.classList.add("draft");
    art.removeAttribute("aria-busy");
    const mid = art.querySelector("a.mid");
    if (mid) {
      const label = document.createElement("span");
      label.className = "mid"; label.textContent = ev.draft_id || "draft";
      mid.replaceWith(label);
    }
    const note = document.createElement("span");
    note.className = "where";
    note.textContent = "incomplete: " + ev.error;
    art.querySelector("header").append(" ", note);
  }

  async function messageDone(ev) {
    streaming.delete(ev.message_id);
    if (thinking) thinking.hidden = true;
    if (!thread || unseen(ev)) return;
    let art = document.getElementById(ev.message_id);
    if (!art) { // said, not streamed (a human message): its place is now, before any reply
      art = placeholder(ev);
      art.querySelector(".body").textContent = ev.content;
    }
    art.classList.remove("streaming");
    art.removeAttribute("aria-busy");
    // the server renders the finished message (safe Markdown, reply link) in its place
    try {
      const as = seenBy ? "?as=" + encodeURIComponent(seenBy) : "";
      const res = await fetch("/s/" + encodeURIComponent(sid) + "/m/" + encodeURIComponent(ev.message_id) + as);
      if (res.status === 204) { // not seen by the role the page shows the session as
        const gone = document.getElementById(ev.message_id);
        if (gone) gone.remove();
        return;
      }
      if (!res.ok) return;
      const holder = document.createElement("div");
      holder.innerHTML = await res.text();
      const fresh = holder.firstElementChild;
      const old = document.getElementById(ev.message_id);
      if (old && fresh) old.replaceWith(fresh);
      showRetry(); // as the session stands now, not as when the server rendered it
      cutNote(ev.message_id);
      // Retry is for the latest answer only
      thread.querySelectorAll("form.retry").forEach((f) => {
        if (!f.closest("#" + CSS.escape(ev.message_id))) f.remove();
      });
    } catch (e) { /* the next page load shows it */ }
  }

  // tool calls (tools.md): one line each in the turn's message, its result folded under
  // it, as the server renders a stored one (_tool_call.html); text only through textContent
  const CONTROLS = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;
  function visible(value) { // control characters shown, not obeyed (as export.common.visible)
    return String(value).replace(/\r\n/g, "\n").replace(CONTROLS, (c) => {
      const code = c.charCodeAt(0);
      if (code < 0x20) return String.fromCharCode(0x2400 + code);
      if (code === 0x7f) return "\u2421";
      return "<U+" + code.toString(16).toUpperCase().padStart(4, "0") + ">";
    });
  }
  function shortArguments(args) {
    const line = visible(Object.entries(args || {}).map(([k, v]) => k + "=" + JSON.stringify(v)).join(", "));
    return line.length <= 60 ? line : line.slice(0, 59) + "…";
  }
  function span(cls, value) {
    const el = document.createElement("span");
    el.className = cls; el.textContent = value;
    return el;
  }
  function callState(li, state) {
    li.className = "tool-call state-" + state;
  }

  function toolCall(ev) {
    turnBegins();
    if (!thread || !ev.message_id || document.getElementById("call-" + ev.call_id)) return;
    let art = document.getElementById(ev.message_id);
    if (!art) art = placeholder(ev); // followed from the store: no streamed start
    let list = art.querySelector("ol.tools");
    if (!list) {
      list = document.createElement("ol");
      list.className = "tools"; list.setAttribute("aria-label", "tool calls");
      art.insertBefore(list, art.querySelector(".body"));
    }
    const li = document.createElement("li");
    li.id = "call-" + ev.call_id; li.dataset.call = ev.call_id;
    callState(li, "running");
    const details = document.createElement("details");
    const summary = document.createElement("summary");
    const tool = document.createElement("code");
    tool.className = "tool"; tool.textContent = ev.tool;
    summary.append(span("gear", "⚙"), " ", tool, span("args", "(" + shortArguments(ev.arguments) + ")"),
      span("took", ""), span("decided", ""), span("failed", ""));
    summary.firstChild.setAttribute("aria-hidden", "true");
    const detail = document.createElement("div");
    detail.className = "call-detail";
    const pre = document.createElement("pre");
    pre.className = "arguments"; pre.textContent = visible(JSON.stringify(ev.arguments || {}, null, 2));
    detail.append(span("label", "arguments"), pre);
    details.append(summary, detail);
    li.append(details);
    list.append(li);
    if (thinking) { thinking.hidden = false; thinking.textContent = nameOf(ev.sender) + " calls " + ev.tool + "…"; }
    checkWaiting();
  }

  function toolApproval(ev) {
    const li = document.getElementById("call-" + ev.call_id);
    if (!li) return;
    li.querySelectorAll(".approval").forEach((el) => el.remove());
    if (li.classList.contains("state-waiting")) callState(li, "running");
    let words = "";
    const edited = ev.arguments && Object.keys(ev.arguments).length > 0;
    if (ev.decision === "deny") { callState(li, "refused"); words = "refused by " + ev.by; }
    else if (ev.by === "human") words = edited ? "approved with edited arguments" : "approved";
    else if (ev.by !== "policy") words = "allowed by " + ev.by;
    text(li.querySelector("summary .decided"), words ? " · " + words : "");
    if (edited) { // the call runs with a person's arguments: shown, the model's kept below
      const detail = li.querySelector(".call-detail");
      const asked = document.createElement("pre");
      asked.className = "asked"; asked.textContent = detail.querySelector("pre.arguments").textContent;
      detail.prepend(span("label", "the model asked for"), asked);
      detail.querySelector("pre.arguments").textContent = visible(JSON.stringify(ev.arguments, null, 2));
      text(li.querySelector("summary .args"), "(" + shortArguments(ev.arguments) + ")");
    }
  }

  function toolResult(ev) {
    const li = document.getElementById("call-" + ev.call_id);
    if (!li) return;
    const refused = li.classList.contains("state-refused");
    const summary = li.querySelector("summary");
    if (!refused) {
      text(summary.querySelector(".took"), " · " + ev.duration_ms.toLocaleString("en-US") + " ms");
      callState(li, ev.is_error ? "error" : "done");
      if (ev.is_error) text(summary.querySelector(".failed"), " · error");
    }
    const pre = document.createElement("pre");
    pre.className = "result"; pre.textContent = visible(ev.content);
    li.querySelector(".call-detail").append(span("label", refused ? "refusal" : "result"), pre);
  }

  // `approve: ask` (tools.md, Approval): the calls that wait for a person get Approve and
  // Deny (and an edit of their arguments); the answer goes through the JSON API
  let asking = null; // the request in flight; another is asked for once it is done
  let askAgain = false;
  function checkWaiting() {
    if (asking) { askAgain = true; return; }
    asking = fetch("/api/sessions/" + encodeURIComponent(sid) + "/approvals")
      .then((res) => (res.ok ? res.json() : { waiting: [] }))
      .then((answer) => showWaiting(answer.waiting || []))
      .catch(() => {})
      .finally(() => { asking = null; if (askAgain) { askAgain = false; checkWaiting(); } });
  }

  function showWaiting(calls) {
    for (const call of calls) {
      const li = document.getElementById("call-" + call.call_id);
      if (!li || li.querySelector(".approval")) continue;
      callState(li, "waiting");
      const box = document.createElement("div");
      box.className = "approval";
      const yes = document.createElement("button");
      yes.type = "button"; yes.className = "approve"; yes.textContent = "Approve";
      const no = document.createElement("button");
      no.type = "button"; no.className = "deny"; no.textContent = "Deny";
      const edit = document.createElement("details");
      edit.className = "edit";
      const editSummary = document.createElement("summary");
      editSummary.textContent = "Edit arguments";
      const area = document.createElement("textarea");
      area.rows = 3; area.setAttribute("aria-label", "arguments (JSON)");
      area.value = JSON.stringify(call.arguments || {}, null, 2);
      const withArgs = document.createElement("button");
      withArgs.type = "button"; withArgs.className = "approve-edited"; withArgs.textContent = "Approve with these arguments";
      edit.append(editSummary, area, withArgs);
      const problem = span("error", "");
      problem.setAttribute("role", "alert");
      box.append(yes, no, problem, edit);
      li.append(box);
      const answer = async (body) => {
        box.querySelectorAll("button").forEach((b) => { b.disabled = true; });
        const ok = await post("/approve", Object.assign({ call_id: call.call_id }, body), problem);
        if (!ok) box.querySelectorAll("button").forEach((b) => { b.disabled = false; });
      };
      yes.addEventListener("click", () => answer({ decision: "allow" }));
      no.addEventListener("click", () => answer({ decision: "deny" }));
      withArgs.addEventListener("click", () => {
        let args;
        try { args = JSON.parse(area.value); } catch (e) { problem.textContent = "the arguments are not JSON (" + e.message + ")"; return; }
        if (!args || typeof args !== "object" || Array.isArray(args)) { problem.textContent = "the arguments must be a JSON object"; return; }
        answer({ decision: "allow", arguments: args });
      });
      if (thinking) { thinking.hidden = false; thinking.textContent = "a call waits: " + call.tool + " (Approve / Deny)"; }
    }
  }

  function highlight(node) {
    document.querySelectorAll(".node.current").forEach((n) => n.classList.remove("current"));
    if (node) node.classList.add("current");
  }

  function sessionState(ev) {
    let words = ev.state;
    let detail = ev.state;
    if (ev.state === "finished") {
      words = "finished" + (ev.reason ? " (" + ev.reason + ")" : "");
      detail = "finished: " + (ev.reason || "unknown reason") + (stopDetail ? " (" + stopDetail + ")" : "");
      const talk = document.getElementById("talk");
      if (talk) talk.remove(); // a finished session takes no more messages
      text(stepEl, "");
    } else if (ev.state === "paused") {
      words = "paused" + (ev.reason ? " (" + ev.reason + ")" : "");
      detail = words;
    } else if (ev.state === "running") {
      words = restStatus || "running"; // a chat with every reply in waits for you
      detail = words;
    }
    text(statusEl, words);
    text(detailEl, detail);
    page.dataset.status = ev.state;
    if (thinking && ev.state !== "running") thinking.hidden = true;
  }

  function onEvent(ev) {
    if (ev.topic === "sse" && ev.type === "start") streamStart(ev);
    else if (ev.topic === "sse" && ev.type === "chunk") streamChunk(ev);
    else if (ev.topic === "sse" && ev.type === "error") streamError(ev);
    else if (ev.topic === "system" && ev.type === "trim") streamTrim(ev);
    else if (ev.topic === "messages" && ev.type === "message") messageDone(ev);
    else if (ev.topic === "messages" && ev.type === "tool_call") toolCall(ev);
    else if (ev.topic === "messages" && ev.type === "tool_result") toolResult(ev);
    else if (ev.topic === "system" && ev.type === "tool_approval") toolApproval(ev);
    else if (ev.topic === "system" && ev.type === "selection" && ev.chosen) chosenFor.set(ev.chosen, chosenNote(ev));
    else if (ev.topic === "system" && ev.type === "step") {
      stepDone(ev);
      const runs = document.querySelector("#node-" + CSS.escape(ev.step_id) + " .runs");
      if (runs) runs.textContent = "×" + (ev.loop_iteration + 1);
    } else if (ev.topic === "world" && ev.type === "stop") stopDetail = ev.detail || "";
    else if (ev.topic === "world" && ev.type === "session") sessionState(ev);
  }

  function follow() {
    const after = page.dataset.lastSeq || "0";
    const source = new EventSource("/api/sessions/" + encodeURIComponent(sid) + "/stream?after=" + after);
    source.onmessage = (msg) => {
      const ev = JSON.parse(msg.data);
      page.dataset.lastSeq = String(ev.seq);
      onEvent(ev);
    };
    source.addEventListener("rest", (msg) => {
      try { rest(JSON.parse(msg.data)); } catch (e) { /* a later event says it again */ }
    });
    // the session finished or came to rest (paused): talking or a button follows it again
    source.addEventListener("end", () => {
      source.close(); page.dataset.live = "no"; busyNow = false; showRetry();
    });
  }

  if (page.dataset.live === "yes" || page.dataset.status === "running") follow();

  // reply links: scroll to the answered message and highlight it
  document.addEventListener("click", (e) => {
    const link = e.target.closest && e.target.closest("a.reply, a.mid, a.cite");
    if (!link) return;
    const target = document.getElementById(link.getAttribute("href").slice(1));
    if (!target) return;
    document.querySelectorAll(".highlight").forEach((m) => m.classList.remove("highlight"));
    target.classList.add("highlight");
  });
  function highlightHash() {
    const id = location.hash.slice(1);
    const target = id && document.getElementById(id);
    if (target && target.classList.contains("message")) target.classList.add("highlight");
  }
  window.addEventListener("hashchange", highlightHash);
  highlightHash();

  // talking: the message box, @role completion, the control buttons
  const form = document.getElementById("say");
  const box = document.getElementById("say-text");
  const list = document.getElementById("mentions");
  const errorEl = document.getElementById("control-error");
  const roles = (page.dataset.roles || "").split(",").filter(Boolean).concat(["all"]);

  async function post(path, body, shownIn) {
    const res = await fetch("/api/sessions/" + encodeURIComponent(sid) + path, {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
    });
    const answer = await res.json().catch(() => ({}));
    text(shownIn || errorEl, res.ok ? "" : (answer.error || "failed (" + res.status + ")"));
    if (res.ok && page.dataset.live !== "yes") { page.dataset.live = "yes"; follow(); }
    return res.ok;
  }

  function mentionAt() {
    const upto = box.value.slice(0, box.selectionStart);
    const m = /(^|\s)@([\w-]*)$/.exec(upto);
    return m ? { start: upto.length - m[2].length, word: m[2] } : null;
  }

  function pick(role) {
    const at = mentionAt();
    if (!at) return;
    box.value = box.value.slice(0, at.start) + role + " " + box.value.slice(box.selectionStart);
    list.hidden = true;
    box.focus();
  }

  if (box && list) {
    box.addEventListener("input", () => {
      const at = mentionAt();
      list.replaceChildren();
      const found = at ? roles.filter((r) => r.startsWith(at.word)) : [];
      for (const role of found) {
        const li = document.createElement("li");
        li.textContent = "@" + role; li.setAttribute("role", "option"); li.dataset.role = role;
        li.addEventListener("mousedown", (e) => { e.preventDefault(); pick(role); });
        list.append(li);
      }
      list.hidden = found.length === 0;
    });
    box.addEventListener("keydown", (e) => {
      if (e.key === "Tab" && !list.hidden && list.firstElementChild) {
        e.preventDefault(); pick(list.firstElementChild.dataset.role);
      } else if (e.key === "Escape") list.hidden = true;
      else if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); }
    });
  }
  if (form) {
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const value = box.value.trim();
      if (!value) return;
      const hear = Array.from(form.querySelectorAll("input[name=hear]:checked")).map((c) => c.value);
      const body = hear.length ? { text: value, audience: hear } : { text: value };
      if (await post("/say", body)) {
        box.value = "";
        form.querySelectorAll("input[name=hear]").forEach((c) => { c.checked = false; });
      }
    });
  }
  // a flag for {flag: NAME} conditions (the REPL's /flag NAME), then the flags set
  const flagForm = document.getElementById("flag-form");
  if (flagForm) {
    flagForm.addEventListener("submit", async (e) => {
      e.preventDefault();
      const input = document.getElementById("flag-name");
      const name = input.value.trim();
      if (!name || !(await post("/flag", { name }))) return;
      const shown = document.getElementById("flags");
      const set = shown.dataset.set ? shown.dataset.set.split(" ") : [];
      if (!set.includes(name)) set.push(name);
      set.sort();
      shown.dataset.set = set.join(" ");
      text(shown, set.join(", "));
      input.value = "";
    });
    // the flags the world checks, one click each
    flagForm.querySelectorAll("button.flag-pick").forEach((button) => {
      button.addEventListener("click", () => {
        document.getElementById("flag-name").value = button.dataset.flag;
        flagForm.requestSubmit();
      });
    });
  }
  document.querySelectorAll(".controls button[data-action]").forEach((button) => {
    button.addEventListener("click", () => post("/control", { action: button.dataset.action }));
  });
})();

// the role library (/roles): the cards filter as you type (the form searches without it)
(function () {
  const library = document.getElementById("roles");
  const box = document.getElementById("roles-q");
  if (!library || !box) return;
  const cards = [...library.querySelectorAll(".role-card")];
  const count = document.getElementById("roles-count");
  const none = document.getElementById("roles-none");
  function filter() {
    const wanted = box.value.trim().toLowerCase();
    let shown = 0;
    for (const card of cards) {
      const on = !wanted || (card.dataset.text || "").includes(wanted);
      card.hidden = !on;
      if (on) shown += 1;
    }
    if (count) {
      count.textContent = wanted
        ? shown + " of " + cards.length + " roles match “" + box.value.trim() + "”"
        : cards.length + (cards.length === 1 ? " role" : " roles");
    }
    if (none) none.hidden = shown > 0;
  }
  box.addEventListener("input", filter);
})();

// a session's page searched (?q=TEXT, as the sessions list's hits link to it): the text is
// marked in each message shown, as the list's snippets mark it
(function () {
  const thread = document.getElementById("thread");
  const wanted = (new URLSearchParams(location.search).get("q") || "").trim();
  if (!thread || !wanted) return;
  const needle = wanted.toLowerCase();
  for (const body of thread.querySelectorAll(".message .body")) {
    const walker = document.createTreeWalker(body, NodeFilter.SHOW_TEXT);
    const nodes = [];
    while (walker.nextNode()) nodes.push(walker.currentNode);
    for (const node of nodes) {
      const value = node.nodeValue;
      const lower = value.toLowerCase();
      if (lower.length !== value.length) continue; // (its places would not be the text's)
      let at = lower.indexOf(needle);
      if (at < 0) continue;
      const parts = document.createDocumentFragment();
      let from = 0;
      while (at >= 0) {
        parts.append(value.slice(from, at));
        const mark = document.createElement("mark");
        mark.textContent = value.slice(at, at + needle.length);
        parts.append(mark);
        from = at + needle.length;
        at = lower.indexOf(needle, from);
      }
      parts.append(value.slice(from));
      node.replaceWith(parts);
    }
  }
})();
