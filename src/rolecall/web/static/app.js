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
  const streaming = new Map(); // message id -> element being streamed

  function text(el, value) { if (el) el.textContent = value; }

  function streamStart(ev) {
    if (!thread || document.getElementById(ev.message_id)) return;
    const empty = document.getElementById("no-messages");
    if (empty) empty.remove();
    const art = document.createElement("article");
    art.className = "message streaming";
    art.id = ev.message_id;
    art.dataset.sender = ev.sender;
    const head = document.createElement("header");
    const mid = document.createElement("a");
    mid.className = "mid"; mid.href = "#" + ev.message_id; mid.textContent = ev.message_id;
    const who = document.createElement("span");
    who.className = "who"; who.textContent = ev.sender;
    head.append(mid, " ", who);
    if (ev.step_id) {
      const where = document.createElement("span");
      where.className = "where";
      where.textContent = "step " + ev.step_id + (ev.loop_iteration ? " · loop " + ev.loop_iteration : "");
      head.append(" ", where);
    }
    const body = document.createElement("div");
    body.className = "body live-text";
    art.append(head, body);
    thread.append(art);
    streaming.set(ev.message_id, body);
    if (thinking) { thinking.hidden = false; thinking.textContent = ev.sender + " is thinking…"; }
  }

  function streamChunk(ev) {
    const body = streaming.get(ev.message_id);
    if (body) body.append(document.createTextNode(ev.delta));
    if (thinking) thinking.textContent = ev.sender + " is writing…";
  }

  async function messageDone(ev) {
    streaming.delete(ev.message_id);
    if (thinking) thinking.hidden = true;
    if (!thread) return;
    // the server renders the finished message (safe Markdown, reply link)
    try {
      const res = await fetch("/s/" + encodeURIComponent(sid) + "/m/" + encodeURIComponent(ev.message_id));
      if (!res.ok) return;
      const holder = document.createElement("div");
      holder.innerHTML = await res.text();
      const fresh = holder.firstElementChild;
      const old = document.getElementById(ev.message_id);
      if (old) old.replaceWith(fresh); else thread.append(fresh);
    } catch (e) { /* the next page load shows it */ }
  }

  function highlight(node) {
    document.querySelectorAll(".node.current").forEach((n) => n.classList.remove("current"));
    if (node) node.classList.add("current");
  }

  function onEvent(ev) {
    if (ev.topic === "sse" && ev.type === "start") streamStart(ev);
    else if (ev.topic === "sse" && ev.type === "chunk") streamChunk(ev);
    else if (ev.topic === "messages" && ev.type === "message") messageDone(ev);
    else if (ev.topic === "system" && ev.type === "step") {
      text(stepEl, "step " + ev.step_id + (ev.loop_iteration ? " · loop " + ev.loop_iteration : ""));
      highlight(document.getElementById("node-" + ev.step_id));
      const runs = document.querySelector("#node-" + CSS.escape(ev.step_id) + " .runs");
      if (runs) runs.textContent = "×" + (ev.loop_iteration + 1);
    } else if (ev.topic === "world" && ev.type === "session") {
      if (ev.state === "finished") text(statusEl, "finished" + (ev.reason ? " (" + ev.reason + ")" : ""));
      else if (ev.state === "paused") text(statusEl, "paused");
      else if (ev.state === "running") text(statusEl, "running");
      if (thinking && ev.state !== "running") thinking.hidden = true;
    }
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
    const link = e.target.closest && e.target.closest("a.reply, a.mid");
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
  document.querySelectorAll(".controls button[data-action]").forEach((button) => {
    button.addEventListener("click", () => post("/control", { action: button.dataset.action }));
  });
})();
