// ampquiz interview mode (no inline scripts: the CSP allows only this server's files).
// - the candidate's timer, counting down to the deadline the server rendered;
// - the interviewer's live page: an EventSource on /interviewer/TOKEN/events (it reconnects by
//   itself and sends Last-Event-ID, so nothing is missed across a restart), each event shown in
//   its question's section; notes are saved without leaving the page.
"use strict";

(function () {
  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // The countdown, and what it says as time runs out: a minute left, 15 seconds left, then "time
  // is up" with the grace the server still gives an answer sent as the clock ran out; past that
  // the page is loaded again, and the server's own page says the time is up (a candidate who
  // went on typing lost the answer to a refusal they had not seen coming).
  function setUpTimer(box) {
    const deadline = Date.now() + parseInt(box.dataset.leftMs, 10);  // by the server's clock
    const grace = 1000 * (parseInt(box.dataset.graceS, 10) || 0);
    const out = box.querySelector("[data-time-left]");
    const clock = box.querySelector("[role=timer]");
    const said = box.querySelector("[data-time-said]");
    const over = document.querySelector("[data-time-up], [data-interview-over]");
    let told = "";
    function say(key, text) {
      if (told === key) return;
      told = key;
      said.textContent = text;
    }
    function tick() {
      const ms = deadline - Date.now();
      const left = Math.ceil(ms / 1000);
      box.classList.toggle("low", left <= 60);
      if (ms <= 0) {
        clock.textContent = "Time is up.";
        box.classList.add("up");
        document.querySelectorAll("[data-extend]").forEach(function (form) { form.hidden = true; });
        if (over) return;  // the server's page says so already
        if (ms > -grace) {
          say("up", document.querySelector("form.answer")
            ? "Lock in what you have now, with how sure you are, or it is lost."
            : "Runs and more time are no longer taken.");
          setTimeout(tick, 250);
        } else if (sessionStorage.getItem("time-up-reload") !== box.dataset.deadline) {
          sessionStorage.setItem("time-up-reload", box.dataset.deadline);  // once: never a loop
          window.location.reload();
        }
        return;
      }
      const m = Math.floor(left / 60), s = left % 60;
      out.textContent = m + ":" + String(s).padStart(2, "0");
      if (left <= 15) say("15", "Under 15 seconds left.");
      else if (left <= 60) say("60", "One minute left.");
      setTimeout(tick, 250);
    }
    tick();
  }

  function time(iso) {
    return new Date(iso).toLocaleTimeString();
  }

  function setUpLive(root) {
    const status = document.querySelector("[data-live-status]");
    const seen = new Set();
    const opened = {};

    function section(id) {
      return root.querySelector('[data-question="' + CSS.escape(String(id)) + '"]');
    }

    function scrolling(pre, label) {
      pre.tabIndex = 0;
      pre.setAttribute("aria-label", label);
      return pre;
    }

    function printedBlock(text, label) {
      const pre = el("pre", "mono interview-output");
      pre.append(el("code", "printed", text));
      return scrolling(pre, label);
    }

    // A unified diff, its added and removed lines coloured as a What-if card's are.
    function diffBlock(text) {
      const pre = el("pre", "mono interview-diff what-if-diff");
      text.split("\n").forEach(function (row, i) {
        const kind = row.startsWith("+++") || row.startsWith("---") ? "head" : row.startsWith("@@") ? "hunk"
          : row.startsWith("+") ? "add" : row.startsWith("-") ? "del" : "same";
        if (i) pre.append("\n");  // copied, the diff keeps its lines
        pre.append(el("span", "d-" + kind, row));
      });
      return pre;
    }

    function show(event) {
      if (seen.has(event.id)) return;
      seen.add(event.id);
      const data = event.data || {};
      const box = data.question !== undefined ? section(data.question) : null;
      if (event.kind === "opened" && box) {
        opened[data.question] = Date.parse(event.at);
        box.querySelector("[data-state]").textContent = "opened at " + time(event.at);
        box.classList.add("is-open");
      } else if (event.kind === "predicted" && box) {
        const p = box.querySelector("[data-prediction]");
        p.replaceChildren();
        const line = el("p", "interview-prediction " + (data.correct ? "right" : "wrong"));
        const answer = String(data.answer), truth = String(data.truth);
        if (answer.includes("\n") || truth.includes("\n")) {
          // Output over several lines, each kept: run into one line of text, "0 16" read as one value.
          line.append("Predicted with " + data.confidence + " % confidence: ", el("strong", "", data.correct ? "right" : "wrong"), ".");
          p.append(line, el("p", "small", "Predicted:"), printedBlock(answer, "The prediction"),
            el("p", "small", "The answer:"), printedBlock(truth, "The answer"));
        } else {
          line.append("Predicted ", el("code", "printed", answer), " with " + data.confidence + " % confidence: ",
            el("strong", "", data.correct ? "right" : "wrong"), " (the answer: ", el("code", "printed", truth), ")");
          p.append(line);
        }
        // Graded on the author's word: no run on the device the question asks about proved the key.
        if (data.authors_word) p.append(el("p", "notice small", "Graded by the author's answer: no run has proved this key yet."));
      } else if (event.kind === "run" && box) {
        const item = el("li", "interview-run");
        item.dataset.run = String(event.id);
        item.append(el("p", "small", "Run at " + time(event.at) + " · " + data.status +
          (data.duration_ms ? " · " + Math.round(data.duration_ms) + " ms" : "")));
        // Each scrolls sideways where a line is long: reachable from the keyboard, and named.
        if (data.diff) item.append(scrolling(diffBlock(data.diff), "The change to the code"));
        else item.append(el("p", "muted small", "The question's code, unchanged."));
        item.append(scrolling(el("pre", "mono interview-output", data.stdout || data.error || "(no output)"), "What it printed"));
        if (data.summary && data.summary.length) {
          const list = el("ul", "small");
          data.summary.forEach(function (s) { list.append(el("li", "", s)); });
          item.append(list);
        }
        box.querySelector("[data-runs]").append(item);
      } else if (event.kind === "note" && box) {
        const area = box.querySelector("textarea[name=text]");
        if (document.activeElement !== area) area.value = data.text;
        area.closest("form").dataset.savedText = data.text;
        box.querySelector("[data-saved]").textContent = "saved " + time(event.at);
      } else if ((event.kind === "next" || event.kind === "finished") && box) {
        const spent = opened[data.question] ? Math.round((Date.parse(event.at) - opened[data.question]) / 1000) : null;
        box.querySelector("[data-state]").textContent = "done" + (spent !== null ? " in " + spent + " s" : "");
      } else if (event.kind === "extended") {
        const more = data.seconds % 60 ? (data.seconds >= 60 ? Math.floor(data.seconds / 60) + " min " : "") + (data.seconds % 60) + " s"
          : data.seconds / 60 + " min";
        status.textContent = "The candidate asked for more time (+" + more + ").";
      } else if (event.kind === "revoked") {
        status.textContent = "The candidate's link was revoked.";
      }
      if (event.kind === "finished") status.textContent = "The candidate finished the interview.";
    }

    const source = new EventSource(root.dataset.events);
    source.onopen = function () { status.textContent = "Live: updates appear as they happen."; };
    source.onerror = function () { status.textContent = "Reconnecting…"; };
    source.onmessage = function (message) { show(JSON.parse(message.data)); };

    // Notes typed while watching someone live were lost on a reload or a closed tab without a
    // word: leaving with notes not saved asks first, and a save says so when the server has them.
    const notes = root.querySelectorAll("[data-notes-form]");
    window.addEventListener("beforeunload", function (event) {
      const unsaved = Array.from(notes).some(function (form) {
        return form.querySelector("textarea[name=text]").value !== (form.dataset.savedText || "");
      });
      if (unsaved) {
        event.preventDefault();
        event.returnValue = "";
      }
    });
    notes.forEach(function (form) {
      form.addEventListener("submit", async function (event) {
        event.preventDefault();
        const saved = form.querySelector("[data-saved]");
        const text = form.querySelector("textarea[name=text]").value;
        saved.textContent = "saving…";
        try {
          const response = await fetch(root.dataset.notes, {
            method: "POST", body: new URLSearchParams(new FormData(form)), headers: { "Accept": "application/json" },
          });
          if (response.ok) {
            form.dataset.savedText = text;
            saved.textContent = "saved " + time(new Date().toISOString());
          } else {
            saved.textContent = "not saved (" + response.status + ")";
          }
        } catch (err) {
          saved.textContent = "not saved: " + err.message;
        }
      });
    });
  }

  // A link's Copy button (a 90-character link was fiddly to select on a phone): the clipboard
  // where the page may write it (HTTPS, or this host), else the link selected, to copy by hand.
  function setUpCopy(button) {
    const link = document.getElementById(button.dataset.copy);
    const said = document.querySelector("[data-copied]");
    button.hidden = false;
    button.addEventListener("click", async function () {
      try {
        await navigator.clipboard.writeText(link.textContent.trim());
        if (said) said.textContent = "Copied.";
      } catch (err) {
        const range = document.createRange();
        range.selectNodeContents(link);
        const selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        if (said) said.textContent = "Selected: copy it from the menu.";
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-deadline]").forEach(setUpTimer);
    document.querySelectorAll("[data-copy]").forEach(setUpCopy);
    // A form that cannot be undone (revoking the candidate's link) asks first: one stray tap, next
    // to the link being copied, ended a live interview for good.
    document.querySelectorAll("form[data-confirm]").forEach(function (form) {
      form.addEventListener("submit", function (event) {
        if (!window.confirm(form.dataset.confirm)) event.preventDefault();
      });
    });
    const live = document.getElementById("live");
    if (live && live.dataset.events) setUpLive(live);
  });
})();
