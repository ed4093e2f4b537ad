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

// "x of n answered", live: a question counts once its score is chosen and its rationale
// (where it has one) reaches the minimum; the bar's link jumps to the first one left.
(function () {
  var form = document.getElementById("review-form");
  var out = document.getElementById("answered");
  if (!form || !out) return;
  var groups = Array.prototype.filter.call(
    form.querySelectorAll("fieldset.metric"),
    function (fs) { return fs.querySelector("input[type=radio]"); }
  );
  function words(box) {
    return box.value.trim() ? box.value.trim().split(/\s+/).length : 0;
  }
  function answered(fs) {
    if (!fs.querySelector("input[type=radio]:checked")) return false;
    var box = fs.querySelector("textarea[data-min-words]");
    return !box || words(box) >= parseInt(box.dataset.minWords || "0", 10);
  }
  function update() {
    var done = 0;
    var next = null;
    groups.forEach(function (fs) {
      if (answered(fs)) done += 1;
      else if (!next) next = fs;
    });
    out.textContent = done + " of " + groups.length + " answered";
    var link = document.getElementById("next-unanswered");
    if (link) {
      link.hidden = !next;
      if (next) link.setAttribute("href", "#" + next.id);
    }
  }
  form.addEventListener("change", update);
  form.addEventListener("input", update);
  update();
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
