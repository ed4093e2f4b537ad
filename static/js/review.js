// The heartbeat that measures time on task fires only while the reviewer is actually
// there (the tab visible and some input, scroll or pointer movement in the last two
// minutes): an open but idle tab must not count as work.
(function () {
  var last = Date.now();
  ["input", "keydown", "scroll", "pointermove", "click"].forEach(function (name) {
    window.addEventListener(name, function () { last = Date.now(); }, { passive: true, capture: true });
  });
  function active() {
    return document.visibilityState === "visible" && Date.now() - last < 120000;
  }
  // The draft's hx-trigger listens for this event (no code in attributes, so htmx needs
  // no eval under the Content-Security-Policy).
  setInterval(function () {
    if (active()) document.body.dispatchEvent(new Event("reviewheartbeat"));
  }, 60000);
})();

// Live word counts under each rationale, so reviewers see the minimum before submitting.
(function () {
  function update(span) {
    var box = document.getElementById(span.dataset.for);
    if (!box) return;
    var need = parseInt(box.dataset.minWords || "0", 10);
    var n = box.value.trim() ? box.value.trim().split(/\s+/).length : 0;
    span.textContent = n + " / " + need + " words";
    span.classList.toggle("short", n < need);
  }
  document.querySelectorAll(".wordcount").forEach(function (span) {
    update(span);
    var box = document.getElementById(span.dataset.for);
    if (box) box.addEventListener("input", function () { update(span); });
  });
})();
