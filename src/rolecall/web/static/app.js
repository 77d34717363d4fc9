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

  function text(el, value) { if (el) el.textContent = value; }
  function nameOf(id) { return names[id] || id; }

  function where(ev) {
    return "step " + ev.step_id + (ev.loop_iteration ? " · loop " + ev.loop_iteration : "");
  }

  // a message's element, placed where the event comes: the thread keeps the events' order
  // whatever the order in which the server's rendering of each message arrives
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

  function streamStart(ev) {
    if (ev.step_id && ev.step_id !== "interjection") {
      text(stepEl, where(ev)); // the step running now
      highlight(document.getElementById("node-" + ev.step_id));
    }
    if (!thread || document.getElementById(ev.message_id)) return;
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

  async function messageDone(ev) {
    streaming.delete(ev.message_id);
    if (thinking) thinking.hidden = true;
    if (!thread) return;
    let art = document.getElementById(ev.message_id);
    if (!art) { // said, not streamed (a human message): its place is now, before any reply
      art = placeholder(ev);
      art.querySelector(".body").textContent = ev.content;
    }
    art.classList.remove("streaming");
    art.removeAttribute("aria-busy");
    // the server renders the finished message (safe Markdown, reply link) in its place
    try {
      const res = await fetch("/s/" + encodeURIComponent(sid) + "/m/" + encodeURIComponent(ev.message_id));
      if (!res.ok) return;
      const holder = document.createElement("div");
      holder.innerHTML = await res.text();
      const fresh = holder.firstElementChild;
      const old = document.getElementById(ev.message_id);
      if (old && fresh) old.replaceWith(fresh);
      // Retry is for the latest answer only
      thread.querySelectorAll("form.retry").forEach((f) => {
        if (!f.closest("#" + CSS.escape(ev.message_id))) f.remove();
      });
    } catch (e) { /* the next page load shows it */ }
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
      detail = "running";
    }
    text(statusEl, words);
    text(detailEl, detail);
    page.dataset.status = ev.state;
    if (thinking && ev.state !== "running") thinking.hidden = true;
  }

  function onEvent(ev) {
    if (ev.topic === "sse" && ev.type === "start") streamStart(ev);
    else if (ev.topic === "sse" && ev.type === "chunk") streamChunk(ev);
    else if (ev.topic === "messages" && ev.type === "message") messageDone(ev);
    else if (ev.topic === "system" && ev.type === "step") {
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
    // the session finished or came to rest (paused): talking or a button follows it again
    source.addEventListener("end", () => { source.close(); page.dataset.live = "no"; });
  }

  if (page.dataset.live === "yes" || page.dataset.status === "running") follow();

  // reply links: scroll to the answered message and highlight it
  document.addEventListener("click", (e) => {
    const link = e.target.closest && e.target.closest("a.reply, a.mid, a.cite");
    if (!link) return;
    const target = document.getElementById(link.getAttribute("href").slice(1));
    if (!target) return;
    document.querySelectorAll(".message.highlight").forEach((m) => m.classList.remove("highlight"));
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

  async function post(path, body) {
    const res = await fetch("/api/sessions/" + encodeURIComponent(sid) + path, {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
    });
    const answer = await res.json().catch(() => ({}));
    text(errorEl, res.ok ? "" : (answer.error || "failed (" + res.status + ")"));
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
      if (await post("/say", { text: value })) box.value = "";
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
        : cards.length + " roles";
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
