// Runs before the page paints (not deferred), so a reader who chose a theme never sees a flash of
// the other one. The choice is remembered in this browser; without it, the system's scheme applies.
"use strict";
(function () {
  try {
    const chosen = localStorage.getItem("ampquiz-theme");
    if (chosen === "light" || chosen === "dark") document.documentElement.dataset.theme = chosen;
  } catch (err) { /* storage blocked: follow the system */ }
})();
