// The studio's editor: problems at line:column as the author types (checked by the server with
// the same loader as `ampquiz lint`), run a question, take its output as the answer, preview,
// save; list the classic AMP mistakes' runs as wrong choices and add one with a click. The page's
// YAML text is the author's own: only "use this output" and "add as choice" rewrite it (a YAML
// round trip on the server that keeps comments and order).
// Save is compare-and-swap: it sends the version of the file this page opened (and the text it
// opened); a file saved since by another author, tab or process answers 409 with their changes
// against what this page opened. The author merges them into the text and keeps theirs or takes
// the saved one, then saves on the version now there. A second save once replaced the first
// silently, and both authors were told "Saved".
"use strict";

(function () {
  const box = document.getElementById("studio-editor");
  if (!box) return;
  const name = box.dataset.name;
  const area = document.getElementById("yaml");
  const problems = document.getElementById("problems");
  const select = document.getElementById("question");
  const useOutput = document.getElementById("use-output");
  const runBox = document.getElementById("studio-run");
  const saved = document.getElementById("save-result");
  let lastOutput = null;
  let lastOutputOf = null;
  let lastProblems = [];
  let timer = null;
  let wanted = box.dataset.focus || "";
  // The version of the file this page stands on, and its text (the file as opened: with a question
  // added by the link that opened the page, the server sends the file's own text apart).
  let version = box.dataset.version || "";
  const openedNode = document.getElementById("studio-opened");
  let base = openedNode ? JSON.parse(openedNode.textContent) : area.value;
  // The text as last saved (or opened): leaving the page with other text asks first. A reload or
  // a tapped link threw an hour's edit away without a word.
  let savedText = area.value;
  window.addEventListener("beforeunload", function (event) {
    if (area.value !== savedText) {
      event.preventDefault();
      event.returnValue = "";
    }
  });

  async function api(path, body) {
    const response = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", "Accept": "application/json" },
      body: JSON.stringify(body),
    });
    const data = await response.json();
    if (!response.ok) {
      const error = new Error(data.error || response.statusText);
      error.data = data;
      throw error;
    }
    return data;
  }

  function show(list, items, empty) {
    list.replaceChildren();
    if (!items.length) {
      const li = document.createElement("li");
      li.className = "muted";
      li.textContent = empty;
      list.appendChild(li);
    }
    items.forEach(function (text) {
      const li = document.createElement("li");
      li.textContent = text;
      list.appendChild(li);
    });
  }

  // The textarea has no line numbers: a problem is a button that puts the cursor on its line and
  // column (and scrolls there), and the cursor's own line and column are shown under the text.
  // "143:5" alone left an author counting lines in a file of 400.
  const cursorAt = document.getElementById("cursor-at");
  function offsetOf(line, col) {
    const lines = area.value.split("\n");
    let offset = 0;
    for (let i = 0; i < Math.min(line - 1, lines.length); i++) offset += lines[i].length + 1;
    const here = lines[Math.min(line, lines.length) - 1] || "";
    return offset + Math.max(0, Math.min(col - 1, here.length));
  }
  function goTo(line, col) {
    const offset = offsetOf(line, col);
    area.focus();
    area.setSelectionRange(offset, offset);
    const lineHeight = parseFloat(getComputedStyle(area).lineHeight) || 20;
    area.scrollTop = Math.max(0, (line - 1) * lineHeight - area.clientHeight / 3);
    showCursor();
  }
  function showCursor() {
    const before = area.value.slice(0, area.selectionStart).split("\n");
    cursorAt.textContent = "Line " + before.length + ", column " + (before[before.length - 1].length + 1);
  }
  ["keyup", "click", "input", "focus"].forEach(function (kind) { area.addEventListener(kind, showCursor); });
  function showProblems(found) {
    show(problems, [], "No problems.");
    if (!found.length) return;
    problems.replaceChildren();
    found.forEach(function (p) {
      const li = document.createElement("li");
      const go = document.createElement("button");
      go.type = "button";
      go.className = "link-button";
      go.textContent = p.line + ":" + p.col;
      go.setAttribute("aria-label", "Go to line " + p.line + ", column " + p.col);
      go.addEventListener("click", function () { goTo(p.line, p.col); });
      li.append(go, ": " + p.message);
      problems.appendChild(li);
    });
  }

  async function check() {
    try {
      const data = await api("/studio/api/check", { name: name, text: area.value });
      lastProblems = data.problems;
      showProblems(data.problems);
      const current = select.value || wanted;
      select.replaceChildren();
      data.questions.forEach(function (id) {
        const option = document.createElement("option");
        option.value = option.textContent = id;
        select.appendChild(option);
      });
      if (data.questions.includes(current)) select.value = current;
      wanted = "";
    } catch (err) {
      show(problems, [err.message], "");
    }
  }

  // A run's verdict on the key is about the file as it was run: once the file changes (the
  // answer taken from that very run, say) it no longer holds, and a red "differs" left standing
  // under "Saved" read as a wrong key that was in fact right (a newcomer's walk).
  let verdict = null;
  let verdictOf = "";
  function verdictMayBeStale(said) {
    if (verdict === null || area.value === verdictOf) return;
    verdict.className = "notice";
    verdict.textContent = said || "The file changed since this run: run it again to check its key.";
  }

  area.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(check, 300);
    verdictMayBeStale();
  });

  document.getElementById("run").addEventListener("click", async function () {
    runBox.innerHTML = '<p class="running" role="status"><span class="spinner" aria-hidden="true"></span>Running…</p>';
    try {
      const data = await api("/studio/api/run", { name: name, text: area.value, question_id: select.value });
      runBox.innerHTML = data.panel;
      verdict = document.createElement("p");
      verdict.className = "notice " + (data.key === "fail" ? "error" : "");
      verdict.textContent = data.key === "pass" ? "The key agrees with this run." : "The key: " + (data.reason || data.key);
      verdictOf = area.value;
      runBox.prepend(verdict);
      lastOutput = data.run.stdout;
      lastOutputOf = select.value;
      useOutput.disabled = false;
    } catch (err) {
      runBox.textContent = err.message;
    }
  });

  // An output belongs to the question that printed it: picking another one disarms it.
  select.addEventListener("change", function () {
    useOutput.disabled = select.value !== lastOutputOf;
  });

  useOutput.addEventListener("click", async function () {
    if (lastOutput === null || select.value !== lastOutputOf) return;
    try {
      const data = await api("/studio/api/use-output", { name: name, text: area.value, question_id: select.value, output: lastOutput });
      area.value = data.text;
      verdictMayBeStale("The answer is now this run's output.");
      check();
    } catch (err) {
      saved.textContent = err.message;
    }
  });

  const mistakes = document.getElementById("studio-distractors");

  function distractor(choice, index, canAdd) {
    const item = document.createElement("li");
    item.className = "distractor";
    item.dataset.rule = choice.rule;
    const text = document.createElement("p");
    text.id = "distractor-" + index;
    text.textContent = choice.text;
    const why = document.createElement("p");
    why.className = "small muted";
    why.textContent = "why: " + choice.why;
    const add = document.createElement("button");
    add.type = "button";
    add.className = "button";
    add.textContent = "Add as choice";
    add.setAttribute("aria-describedby", text.id);
    add.disabled = !canAdd;
    add.addEventListener("click", async function () {
      try {
        const data = await api("/studio/api/add-choice", { text: area.value, question_id: select.value, choice_text: choice.text, why: choice.why, outcome: choice.outcome || null });
        area.value = data.text;
        add.textContent = "Added";
        add.disabled = true;
        check();
      } catch (err) {
        why.textContent = err.message;
      }
    });
    item.append(text, why, add);
    return item;
  }

  document.getElementById("distractors").addEventListener("click", async function () {
    mistakes.innerHTML = '<p class="running" role="status"><span class="spinner" aria-hidden="true"></span>Running each classic mistake…</p>';
    try {
      const data = await api("/studio/api/distractors", { name: name, text: area.value, question_id: select.value });
      const head = document.createElement("h2");
      head.className = "small";
      head.textContent = data.choices.length + " wrong choices proved by running (" + data.mutants + " mistakes applied)";
      mistakes.replaceChildren(head);
      if (!data.can_add && data.choices.length) {
        const note = document.createElement("p");
        note.className = "small muted";
        note.textContent = "Only a multiple-choice question has choices to add these to.";
        mistakes.append(note);
      }
      const list = document.createElement("ul");
      list.className = "distractors";
      data.choices.forEach(function (choice, i) { list.appendChild(distractor(choice, i, data.can_add)); });
      mistakes.append(list);
    } catch (err) {
      mistakes.textContent = err.message;
    }
  });

  function preview(answered) {
    // A file that does not load has no question to show: the preview opened a learner's 422 page
    // ("question_id: Field required") in a new tab. Said here instead, as Run it says it.
    const errors = lastProblems.filter(function (p) { return !p.message.startsWith("warning:"); });
    if (!select.value || errors.length) {
      const first = errors[0];
      runBox.textContent = "Fix the file's problems first" + (first ? " (" + first.line + ":" + first.col + ": " + first.message + ")" : "") + ".";
      return;
    }
    const form = document.getElementById("preview-form");
    form.elements.text.value = area.value;
    form.elements.question_id.value = select.value;
    form.elements.answered.value = answered ? "true" : "false";
    form.submit();
  }
  document.getElementById("preview-before").addEventListener("click", function () { preview(false); });
  document.getElementById("preview-after").addEventListener("click", function () { preview(true); });

  const conflict = document.getElementById("save-conflict");
  const conflictSaid = document.getElementById("save-conflict-said");
  const conflictDiff = document.getElementById("save-conflict-diff");
  const backToMine = document.getElementById("back-to-mine");
  let theirs = null;  // the 409's text and version: what a merged save stands on
  let mine = null;  // the author's text, while they look at theirs

  function showConflict(data) {
    theirs = { text: data.current, version: data.version };
    conflictSaid.textContent = data.error;
    conflictDiff.textContent = data.diff || "(their save left the text as you opened it)";
    backToMine.hidden = true;
    conflict.hidden = false;
    saved.className = "small";
    saved.textContent = "";
    conflict.scrollIntoView({ block: "nearest" });
  }

  // Keep mine: the text in the editor (merged by hand, or not) is saved over theirs.
  document.getElementById("keep-mine").addEventListener("click", function () {
    if (theirs === null) return;
    version = theirs.version;
    base = theirs.text;
    conflict.hidden = true;
    save();
  });
  // Take theirs: the editor shows the file as saved now; "Back to mine" brings the author's text back.
  document.getElementById("take-theirs").addEventListener("click", function () {
    if (theirs === null) return;
    if (mine === null) mine = area.value;
    area.value = theirs.text;
    version = theirs.version;
    base = savedText = theirs.text;
    backToMine.hidden = false;
    verdictMayBeStale();
    check();
  });
  backToMine.addEventListener("click", function () {
    if (mine === null) return;
    area.value = mine;
    mine = null;
    backToMine.hidden = true;
    verdictMayBeStale();
    check();
  });

  document.getElementById("save").addEventListener("click", function () { save(); });

  async function save() {
    saved.className = "small";
    saved.textContent = "Saving…";
    try {
      const text = area.value;
      const data = await api("/studio/api/save", { name: name, text: text, version: version, base: base });
      savedText = base = text;
      version = data.version;
      mine = theirs = null;
      conflict.hidden = true;
      const warns = data.warnings.map(function (w) { return " Warning: " + w.question_id + ": " + w.reason + "."; });
      // Saved with a key its run contradicts: the question is held back from learners and
      // interviews until fixed, which a plain line under the buttons did not make plain.
      saved.className = warns.length ? "notice error" : "notice";
      saved.textContent = data.draft
        ? "Saved " + data.saved + " as a draft: learners do not see it until the problems listed under the editor are fixed."
        : "Saved " + data.saved + "." + warns.join("") + (warns.length ? " Held back from learners until its key agrees with its run." : "");
    } catch (err) {
      if (err.data && err.data.status === 409) {
        showConflict(err.data);
        return;
      }
      const found = (err.data && err.data.problems) || [];
      saved.className = "notice error";
      saved.replaceChildren(err.message);
      if (found.length) {  // a list, each problem on a line of its own (they ran together)
        const list = document.createElement("ul");
        found.forEach(function (p) {
          const li = document.createElement("li");
          li.textContent = p.line + ":" + p.col + ": " + p.message;
          list.appendChild(li);
        });
        saved.appendChild(list);
      }
    }
  }

  check();
  if (box.dataset.line) goTo(parseInt(box.dataset.line, 10), 1);  // a bank status `file:line` link
})();
