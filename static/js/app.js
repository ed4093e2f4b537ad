// Behaviour shared by every page, attached by event delegation so that content htmx
// swaps in later gets it too (templates carry no inline handlers).
(function () {
  // Read-only fields marked data-select-on-focus select their whole value (invitation
  // links), so one click and a copy take the link.
  document.addEventListener("focusin", function (event) {
    var el = event.target;
    if (el instanceof HTMLInputElement && el.hasAttribute("data-select-on-focus")) el.select();
  });
  document.addEventListener("click", function (event) {
    var el = event.target;
    if (el instanceof HTMLInputElement && el.hasAttribute("data-select-on-focus")) el.select();
  });
  // Buttons marked data-confirm ask before their form is sent.
  document.addEventListener("submit", function (event) {
    var button = event.submitter;
    var message = (button && button.getAttribute("data-confirm")) ||
      event.target.getAttribute("data-confirm");
    if (message && !window.confirm(message)) event.preventDefault();
  });
})();
