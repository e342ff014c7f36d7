// Relay's dashboard: the little the pages need from a script. The pages
// work without it (every action is a plain form post); it adds live
// updates, "select all" and a confirmation before deleting.
//
// Served from /assets (the Content-Security-Policy allows no inline
// script), and it never builds markup from strings: live updates swap in
// nodes the server rendered (and escaped).
"use strict";

(function () {
  const EVERY_MS = 2000;

  // Live updates: fetch this page again and swap in its [data-live] part.
  const live = document.querySelector("[data-live]");
  if (live) {
    let busy = false;
    const refresh = async function () {
      if (busy || document.hidden) return;
      busy = true;
      try {
        const res = await fetch(location.href, {
          credentials: "same-origin",
          headers: { "X-Relay-Live": "1" },
        });
        if (!res.ok) return;
        const doc = new DOMParser().parseFromString(await res.text(), "text/html");
        const next = doc.querySelector("[data-live]");
        if (next) {
          // Copied out first: adopting a node takes it out of the live
          // childNodes list, which would skip every other one.
          live.replaceChildren(...Array.from(next.childNodes).map((n) => document.adoptNode(n)));
          live.dataset.updated = String(Date.now());
        }
      } catch (e) {
        // Keep showing the last view; the next tick tries again.
      } finally {
        busy = false;
      }
    };
    setInterval(refresh, EVERY_MS);
  }

  // "Select all on this page".
  document.addEventListener("change", function (e) {
    const t = e.target;
    if (t instanceof HTMLInputElement && t.hasAttribute("data-select-all")) {
      for (const box of document.querySelectorAll("input[name=ids]")) box.checked = t.checked;
    }
  });

  // Ask before deleting.
  document.addEventListener("click", function (e) {
    const t = e.target instanceof Element ? e.target.closest("[data-confirm]") : null;
    if (t && t.tagName === "BUTTON" && !window.confirm(t.getAttribute("data-confirm"))) e.preventDefault();
  });
  document.addEventListener("submit", function (e) {
    const f = e.target;
    if (f instanceof HTMLFormElement && f.hasAttribute("data-confirm") && !window.confirm(f.getAttribute("data-confirm"))) {
      e.preventDefault();
    }
  });
})();
