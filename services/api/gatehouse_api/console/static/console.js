// Gatehouse console: live regions, countdowns and local times, nothing else (pages are server-rendered).
//
// Every element with data-live and an id is replaced, every few seconds, by its
// fresh copy from the same URL: numbers move without a reload. Every
// <time data-countdown datetime="…"> shows the time left until that instant; every
// other <time datetime="…"> (rendered in UTC) gets the browser's local time beside it.
"use strict";

const LOCAL = new Intl.DateTimeFormat(undefined, { dateStyle: "short", timeStyle: "medium" });

function localTimes() {
  for (const el of document.querySelectorAll("time[datetime]:not([data-countdown]):not([data-local])")) {
    const at = Date.parse(el.getAttribute("datetime"));
    if (Number.isNaN(at)) continue;
    el.dataset.local = LOCAL.format(at);
    const local = document.createElement("small");
    local.className = "local-time";
    local.textContent = ` · ${el.dataset.local} local`;
    el.after(local);
  }
}

const REFRESH_MS = Number(document.body.dataset.refreshMs) || 3000;

function left(ms) {
  if (ms <= 0) return "now";
  const s = Math.ceil(ms / 1000);
  if (s < 60) return `in ${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `in ${m} min ${s % 60} s`;
  return `in ${Math.floor(m / 60)} h ${m % 60} min`;
}

function tick() {
  const now = Date.now();
  for (const el of document.querySelectorAll("time[data-countdown]")) {
    const at = Date.parse(el.getAttribute("datetime"));
    if (!Number.isNaN(at)) {
      el.textContent = left(at - now);
      el.title = el.getAttribute("datetime");
    }
  }
}

let refreshing = false;
async function refresh() {
  const live = document.querySelectorAll("[data-live][id]");
  if (!live.length || document.hidden || refreshing) return;
  refreshing = true;
  try {
    const response = await fetch(location.href, { credentials: "same-origin", headers: { "X-Console-Live": "1" } });
    if (response.redirected || response.status === 401 || response.status === 403) {
      location.reload(); // signed out: the reload lands on the login page
      return;
    }
    if (!response.ok) return;
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const el of live) {
      const copy = fresh.getElementById(el.id);
      if (copy) el.replaceWith(document.importNode(copy, true));
    }
    document.body.dataset.refreshedAt = String(Date.now());
    tick();
    localTimes();
  } catch (err) {
    // The API is restarting or unreachable: keep what is shown, try again next time.
  } finally {
    refreshing = false;
  }
}

tick();
localTimes();
setInterval(tick, 1000);
setInterval(refresh, REFRESH_MS);
