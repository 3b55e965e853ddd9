// ampquiz: small enhancements on top of pages that already work without JavaScript.
// - the playground's editor: line numbers, Tab/Shift+Tab indentation, auto-indent, Ctrl/Cmd+Enter runs
//   without a reload (the server renders the result panel; this only swaps it in);
// - Ctrl/Cmd+Enter submits an answer; keys 1-9 or A-Z pick the choice with that number or letter;
// - after an answer, focus moves to the verdict's heading (screen readers read it first);
// - a run in progress shows a spinner and the seconds it has taken;
// - the header's theme toggle (remembered in this browser; theme.js applies it before paint);
// - hovering a row of an op trace highlights the line of code it came from.
"use strict";

(function () {
  const INDENT = "    ";

  function isSubmitShortcut(event) {
    return event.key === "Enter" && (event.ctrlKey || event.metaKey);
  }

  // ---- the editor ------------------------------------------------------------------------------
  function setUpEditor(box) {
    const area = box.querySelector("textarea");
    const gutter = box.querySelector(".gutter");
    let escaped = false; // after Escape, Tab moves focus instead of indenting (keyboard users can leave)
    let shown = -1;

    function renumber() {
      const lines = area.value.split("\n").length;
      if (lines === shown) return;
      shown = lines;
      let text = "";
      for (let i = 1; i <= lines; i++) text += i + "\n";
      gutter.textContent = text;
    }

    function replaceSelection(start, end, text, selStart, selEnd) {
      area.setSelectionRange(start, end);
      // execCommand keeps the browser's undo history; fall back to setRangeText where it is gone.
      if (!document.execCommand || !document.execCommand("insertText", false, text)) {
        area.setRangeText(text, start, end, "end");
      }
      area.setSelectionRange(selStart, selEnd);
      renumber();
    }

    function indentLines(outdent) {
      const value = area.value;
      const start = value.lastIndexOf("\n", area.selectionStart - 1) + 1;
      let end = value.indexOf("\n", area.selectionEnd - (area.selectionEnd > area.selectionStart ? 1 : 0));
      if (end === -1) end = value.length;
      const lines = value.slice(start, end).split("\n");
      let firstDelta = 0;
      let total = 0;
      const changed = lines.map(function (line, i) {
        if (outdent) {
          const strip = line.match(/^ {1,4}|^\t/);
          const n = strip ? strip[0].length : 0;
          if (i === 0) firstDelta = -n;
          total -= n;
          return line.slice(n);
        }
        if (i === 0) firstDelta = INDENT.length;
        total += INDENT.length;
        return INDENT + line;
      });
      const selStart = Math.max(start, area.selectionStart + firstDelta);
      const selEnd = area.selectionEnd + total;
      replaceSelection(start, end, changed.join("\n"), selStart, selEnd);
    }

    area.addEventListener("keydown", function (event) {
      if (isSubmitShortcut(event)) {
        event.preventDefault();
        area.form.requestSubmit();
        return;
      }
      if (event.key === "Escape") { escaped = true; return; }
      if (event.key === "Tab" && !escaped && !event.altKey && !event.ctrlKey && !event.metaKey) {
        event.preventDefault();
        const multiLine = area.value.slice(area.selectionStart, area.selectionEnd).includes("\n");
        if (event.shiftKey || multiLine) {
          indentLines(event.shiftKey);
        } else {
          const at = area.selectionStart;
          replaceSelection(at, area.selectionEnd, INDENT, at + INDENT.length, at + INDENT.length);
        }
        return;
      }
      escaped = false;
      if (event.key === "Enter" && !event.shiftKey) {
        // keep the current line's indentation, one level deeper after a colon
        const at = area.selectionStart;
        const lineStart = area.value.lastIndexOf("\n", at - 1) + 1;
        const line = area.value.slice(lineStart, at);
        let indent = line.match(/^[ \t]*/)[0];
        if (/:\s*$/.test(line)) indent += INDENT;
        event.preventDefault();
        const text = "\n" + indent;
        replaceSelection(at, area.selectionEnd, text, at + text.length, at + text.length);
      }
    });
    area.addEventListener("input", renumber);
    area.addEventListener("scroll", function () { gutter.scrollTop = area.scrollTop; });
    renumber();
  }

  // ---- times in the reader's own zone (the server writes UTC, and says so, for pages without JS) ----
  function localTimes() {
    const pad = function (n) { return String(n).padStart(2, "0"); };
    let converted = false;
    document.querySelectorAll("time[data-local-time]").forEach(function (el) {
      const at = new Date(el.getAttribute("datetime"));
      if (isNaN(at)) return;
      el.textContent = at.getFullYear() + "-" + pad(at.getMonth() + 1) + "-" + pad(at.getDate()) + " " +
        pad(at.getHours()) + ":" + pad(at.getMinutes());
      converted = true;
    });
    // The column's heading said UTC over times now in the reader's zone.
    if (converted) document.querySelectorAll("[data-zone-label]").forEach(function (el) { el.textContent = "(your time)"; });
  }

  // ---- running without a reload ------------------------------------------------------------------
  function setUpRunForm(form) {
    const section = document.getElementById("run-result");
    const panel = document.getElementById("run-panel");
    const button = form.querySelector("button[type=submit]");
    let running = false;

    form.addEventListener("submit", async function (event) {
      event.preventDefault();
      if (running) return;
      running = true;
      // aria-disabled, not disabled: a disabled button drops the keyboard focus to the page.
      button.setAttribute("aria-disabled", "true");
      button.textContent = "Running…";
      section.hidden = false;
      // On a phone the result is below the editor, off the screen: bring its status into view.
      section.scrollIntoView({ block: "nearest", behavior: matchMedia("(prefers-reduced-motion: reduce)").matches ? "auto" : "smooth" });
      panel.classList.add("run-pending");
      const started = performance.now();
      const status = document.createElement("p");
      status.className = "running";
      status.setAttribute("role", "status");
      status.innerHTML = '<span class="spinner" aria-hidden="true"></span><span class="elapsed">Running…</span>';
      panel.replaceChildren(status);
      const elapsed = status.querySelector(".elapsed");
      const ticker = setInterval(function () {
        elapsed.textContent = "Running… " + ((performance.now() - started) / 1000).toFixed(1) + " s";
      }, 100);
      try {
        const response = await fetch(form.dataset.panel, {
          method: "POST",
          body: new URLSearchParams(new FormData(form)),
          headers: { "Accept": "text/html" },
        });
        panel.innerHTML = await response.text();
      } catch (err) {
        panel.innerHTML = "";
        const p = document.createElement("p");
        p.className = "notice error";
        p.textContent = "Could not reach the server: " + err.message;
        panel.appendChild(p);
      } finally {
        clearInterval(ticker);
        panel.classList.remove("run-pending");
        running = false;
        button.removeAttribute("aria-disabled");
        button.textContent = "Run";
        linkTraceToCode(panel);
        offerWrap(panel);
        // Its heading alone peeked at the bottom of a phone's screen: with the result in, it
        // comes up to the top when it starts low on the screen (where it fits, nothing moves).
        if (section.getBoundingClientRect().top > window.innerHeight * 0.6) {
          section.scrollIntoView({ block: "start", behavior: matchMedia("(prefers-reduced-motion: reduce)").matches ? "auto" : "smooth" });
        }
      }
    });
  }

  // ---- answers ----------------------------------------------------------------------------------------
  function setUpAnswerForm(form) {
    const wait = form.querySelector("[data-retry-after]");
    if (wait) countDown(form, wait);  // first: a sending it holds back never counts as sent below
    let sent = false;
    form.addEventListener("keydown", function (event) {
      if (isSubmitShortcut(event)) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    form.addEventListener("submit", function (event) {
      // One attempt per submit (the server dedupes too): a second click waits for the first.
      if (sent) { event.preventDefault(); return; }
      sent = true;
      const button = form.querySelector("button[type=submit]");
      if (button) button.setAttribute("aria-disabled", "true");
    });
    const inputs = Array.from(form.querySelectorAll("input[name=choice]"));
    if (!inputs.length) return;
    document.addEventListener("keydown", function (event) {
      if (event.ctrlKey || event.metaKey || event.altKey) return;
      const target = event.target;
      if (target && (target.tagName === "TEXTAREA" || (target.tagName === "INPUT" && target.type === "text"))) return;
      const key = event.key.length === 1 ? event.key.toUpperCase() : "";
      let index = -1;
      if (key >= "1" && key <= "9") index = key.charCodeAt(0) - 49;
      else if (key >= "A" && key <= "Z") index = key.charCodeAt(0) - 65;
      if (index < 0 || index >= inputs.length) return;
      event.preventDefault();
      const input = inputs[index];
      input.checked = input.type === "checkbox" ? !input.checked : true;
      input.focus();
    });
  }

  // An answer refused for coming too fast (429) says how long to wait: counted down here, and the
  // button holds a sending until then (the server would refuse it again), so a learner sees when.
  function countDown(form, wait) {
    const until = Date.now() + 1000 * Number(wait.dataset.retryAfter);
    const button = form.querySelector("button[type=submit]");
    if (button) button.setAttribute("aria-disabled", "true");
    function early(event) { event.preventDefault(); event.stopImmediatePropagation(); }
    form.addEventListener("submit", early);
    const left = wait.querySelector("[data-left]");
    const tick = setInterval(function () {
      const seconds = Math.ceil((until - Date.now()) / 1000);
      if (seconds > 0) {
        left.textContent = "You can send it again in " + seconds + " s.";
        return;
      }
      clearInterval(tick);
      left.textContent = "";
      const refusal = form.querySelector(".notice.error");  // "wait N s": no longer true
      if (refusal) refusal.remove();
      wait.querySelector("[role=status]").textContent = "You can send your answer again now.";
      form.removeEventListener("submit", early);
      if (button) button.removeAttribute("aria-disabled");
    }, 1000);
  }

  // ---- the theme toggle ------------------------------------------------------------------------------
  function setUpThemeToggle(button) {
    const root = document.documentElement;
    function current() {
      if (root.dataset.theme) return root.dataset.theme;
      return window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
    }
    function label() {
      const next = current() === "dark" ? "light" : "dark";
      button.textContent = next === "dark" ? "Dark theme" : "Light theme";
      button.setAttribute("aria-label", "Switch to the " + next + " theme");
    }
    button.hidden = false;
    label();
    // Following the system (no theme chosen here), the page turns when the system does: the
    // button's words must turn with it, or a dark page offers "Dark theme".
    const system = window.matchMedia("(prefers-color-scheme: dark)");
    if (system.addEventListener) system.addEventListener("change", label);
    button.addEventListener("click", function () {
      const next = current() === "dark" ? "light" : "dark";
      root.dataset.theme = next;
      try { localStorage.setItem("ampquiz-theme", next); } catch (err) { /* not remembered */ }
      label();
    });
  }

  // ---- output wider than its box: a button wraps its lines ------------------------------------------
  // A tensor's columns read best unwrapped (the box scrolls sideways), a long message or traceback
  // wrapped: on a phone nearly every line is wider than the box, and only the button says so.
  function offerWrap(root) {
    root.querySelectorAll("pre.out, .prose pre").forEach(function (pre) {
      if (pre.dataset.wrapOffered || pre.scrollWidth <= pre.clientWidth + 1) return;  // fits, or hidden in a closed <details>
      pre.dataset.wrapOffered = "1";
      const button = document.createElement("button");
      button.type = "button";
      button.className = "link-button wrap-toggle";
      button.setAttribute("aria-pressed", "false");
      button.textContent = "Wrap long lines";
      button.addEventListener("click", function () {
        const wrapped = pre.classList.toggle("wrapped");
        button.setAttribute("aria-pressed", String(wrapped));
      });
      pre.before(button);
    });
    root.querySelectorAll("details").forEach(function (details) {
      if (details.dataset.wrapWatched) return;
      details.dataset.wrapWatched = "1";
      details.addEventListener("toggle", function () { if (details.open) offerWrap(details); });
    });
  }

  // ---- op trace rows point at code lines ----------------------------------------------------------
  function linkTraceToCode(root) {
    root.querySelectorAll("tr[data-line], li[data-line]").forEach(function (row) {
      const line = document.getElementById("L-" + row.dataset.line);
      if (!line) return;
      row.addEventListener("mouseenter", function () { line.classList.add("lit"); });
      row.addEventListener("mouseleave", function () { line.classList.remove("lit"); });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    localTimes();
    document.querySelectorAll("[data-editor]").forEach(setUpEditor);
    const runForm = document.getElementById("run-form");
    if (runForm && runForm.dataset.panel) setUpRunForm(runForm);
    document.querySelectorAll("form[data-submit-shortcut]").forEach(setUpAnswerForm);
    document.querySelectorAll("[data-theme-toggle]").forEach(setUpThemeToggle);
    linkTraceToCode(document);
    offerWrap(document);
  });
  // How the learner last acted (a tap or click, or a key), kept across the answer's page load: the
  // verdict takes the focus on the result page, and Chromium drew its focus ring after a tap too,
  // where it looked like a selection gone wrong (a newcomer's walk on a phone).
  let modality = "";
  document.addEventListener("pointerdown", function () { modality = "pointer"; }, true);
  document.addEventListener("keydown", function () { modality = "keyboard"; }, true);
  document.addEventListener("submit", function () {
    try { sessionStorage.setItem("ampquiz-answered-by", modality); } catch (err) { /* storage off: the ring shows */ }
  }, true);
  // After the page has loaded and scrolled to #result (which would take the focus back).
  window.addEventListener("load", function () {
    const verdict = document.querySelector("#result .verdict-title");
    // A stored answer's result is a page of its own (…#result); a practice answer's is the
    // form's own response, with no fragment to scroll by: its notice says it is one.
    if (!verdict || (location.hash !== "#result" && !document.querySelector("[data-practice]"))) return;
    let by = "";
    try { by = sessionStorage.getItem("ampquiz-answered-by") || ""; } catch (err) { /* as above */ }
    if (by === "pointer") verdict.classList.add("focused-by-pointer");
    // A practice answer's page opened at the form (its action's #answer): the verdict to the top,
    // as a stored answer's page has it.
    if (location.hash !== "#result") document.getElementById("result").scrollIntoView({ block: "start" });
    requestAnimationFrame(function () { verdict.focus({ preventScroll: location.hash !== "#result" }); });
  });
})();
