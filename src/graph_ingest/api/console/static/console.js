// Live refresh, no framework: every few seconds fetch this same page again and swap in its part
// marked data-live, so the filters, the scroll position and any form outside it stay as they are.
// A failed fetch says so on the page and the next turn tries again.
(function () {
  "use strict";
  const live = document.querySelector("[data-live]");
  const toggle = document.getElementById("live-toggle");
  const stamp = document.getElementById("refreshed");
  if (!live || !toggle) {
    return;
  }
  const periodMs = (Number(live.dataset.live) || 5) * 1000;
  let busy = false;

  async function refresh() {
    if (busy || !toggle.checked || document.hidden) {
      return;
    }
    busy = true;
    try {
      const response = await fetch(window.location.href, { credentials: "same-origin" });
      // A 404 page (an operation the projector has not folded yet) has a live part too: it is
      // swapped in like any other, so the page fills in once the operation arrives.
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = page.querySelector("[data-live]");
      if (fresh) {
        live.replaceChildren(...Array.from(fresh.childNodes).map((n) => document.importNode(n, true)));
      }
      const when = new Date().toLocaleTimeString();
      stamp.textContent = fresh ? "refreshed " + when : "refresh failed at " + when + ": HTTP " + response.status;
    } catch (error) {
      stamp.textContent = "refresh failed: " + error;
    } finally {
      busy = false;
    }
  }

  setInterval(refresh, periodMs);
})();
