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
  // Following the link moves focus to the question, not just the view: keyboard and
  // screen-reader users land on what is left to answer (its score, or its rationale
  // when the score is chosen), and Tab goes on from there.
  var link = document.getElementById("next-unanswered");
  if (link) {
    link.addEventListener("click", function (event) {
      var target = document.getElementById((link.getAttribute("href") || "").slice(1));
      if (!target) return;
      event.preventDefault();
      var chosen = target.querySelector("input[type=radio]:checked");
      var focus = chosen ? (target.querySelector("textarea") || chosen)
        : target.querySelector("input[type=radio]");
      target.scrollIntoView({ block: "start" });
      if (focus) focus.focus({ preventScroll: true });
      history.replaceState(null, "", "#" + target.id);
    });
  }
  form.addEventListener("change", update);
  form.addEventListener("input", update);
  update();
})();

// Once the form is being submitted (the review, or "Save draft"), no autosave may start:
// one fired by the last click's delayed trigger would reach the server after the submit
// and be refused as a stale draft.
(function () {
  var form = document.getElementById("review-form");
  if (!form) return;
  var submitting = false;
  window.addEventListener("submit", function (event) {
    // On window, so a handler that cancelled the submit (a confirmation) ran first.
    if (event.target === form && !event.defaultPrevented) submitting = true;
  });
  document.addEventListener("htmx:beforeRequest", function (event) {
    if (submitting && event.detail && event.detail.elt && event.detail.elt.id === "save-status") {
      event.preventDefault();
    }
  });
  // A page brought back from the back-forward cache may autosave again.
  window.addEventListener("pageshow", function () { submitting = false; });
})();

// Live word counts under each rationale, so reviewers see the minimum before submitting.
(function () {
  function update(span) {
    var box = document.getElementById(span.dataset.for);
    if (!box) return;
    var need = parseInt(box.dataset.minWords || "0", 10);
    var n = box.value.trim() ? box.value.trim().split(/\s+/).length : 0;
    // An optional rationale has no minimum to count towards: just its length.
    span.textContent = need > 0 ? n + " / " + need + " words" : n + (n === 1 ? " word" : " words");
    span.classList.toggle("short", n < need);
  }
  document.querySelectorAll(".wordcount").forEach(function (span) {
    update(span);
    var box = document.getElementById(span.dataset.for);
    if (box) box.addEventListener("input", function () { update(span); });
  });
})();
