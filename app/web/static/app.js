// ampquiz: small enhancements on top of pages that already work without JavaScript.
// - the playground's editor: line numbers, Tab/Shift+Tab indentation, auto-indent, Ctrl/Cmd+Enter runs
//   without a reload (the server renders the result panel; this only swaps it in);
// - Ctrl/Cmd+Enter submits an answer;
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
      button.disabled = true;
      button.textContent = "Running…";
      section.hidden = false;
      panel.classList.add("run-pending");
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
        panel.classList.remove("run-pending");
        running = false;
        button.disabled = false;
        button.textContent = "Run";
        linkTraceToCode(panel);
      }
    });
  }

  // ---- answers ----------------------------------------------------------------------------------------
  function setUpAnswerForm(form) {
    form.addEventListener("keydown", function (event) {
      if (isSubmitShortcut(event)) {
        event.preventDefault();
        form.requestSubmit();
      }
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
    document.querySelectorAll("[data-editor]").forEach(setUpEditor);
    const runForm = document.getElementById("run-form");
    if (runForm && runForm.dataset.panel) setUpRunForm(runForm);
    document.querySelectorAll("form[data-submit-shortcut]").forEach(setUpAnswerForm);
    linkTraceToCode(document);
  });
})();
