/* The web book's own script (loaded first on every page; book/course_book.py adds it).
 *
 * 1. MathJax 2's one call that the widget renderer makes. The ipywidgets controls typeset their
 *    labels with MathJax 2's API, `MathJax.Hub.Queue(["Typeset", MathJax.Hub, element])`, whenever
 *    `window.MathJax` exists; the book serves MathJax 3, which has `MathJax.typesetPromise` and no
 *    `Hub` (an uncaught TypeError "reading 'Queue'" on every page with a slider). Whatever object
 *    becomes `window.MathJax` (the configuration, then MathJax 3 itself) gets a `Hub` whose
 *    `Queue` typesets the element with MathJax 3, once MathJax 3 has started.
 * 2. Accessibility of the saved widgets (they are drawn in the page, after it loads): a slider
 *    handle gets its control's label as its name, and a figure inside a widget gets the alt text
 *    that the book wrote for its cell (`.mha-cell-alt`, from the cell's caption comment).
 */
(function () {
  "use strict";
  var waiting = [];
  function typeset(element) {
    var mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise && mj.typesetPromise) {
      mj.startup.promise.then(function () { return mj.typesetPromise([element]); })
        .catch(function (err) { console.warn("MathJax could not typeset a widget label:", err); });
    } else {
      waiting.push(element);
    }
  }
  var hub = {
    Queue: function () {
      for (var i = 0; i < arguments.length; i++) {
        var job = arguments[i];
        if (Array.isArray(job) && job[0] === "Typeset" && job[2]) { typeset(job[2]); }
      }
    }
  };
  var current = window.MathJax;
  Object.defineProperty(window, "MathJax", {
    configurable: true,
    get: function () { return current; },
    set: function (value) {
      current = value;
      if (value && typeof value === "object" && !value.Hub) { value.Hub = hub; }
      if (value && value.typesetPromise && waiting.length) { waiting.splice(0).forEach(typeset); }
    }
  });
  if (current && !current.Hub) { current.Hub = hub; }

  function labelWidgets(root) {
    root.querySelectorAll(".noUi-handle[role=slider]:not([aria-label])").forEach(function (handle) {
      var control = handle.closest(".widget-slider, .widget-hslider, .widget-vslider, .jupyter-widgets");
      var label = control && control.querySelector(".widget-label");
      var text = label && label.textContent.trim();
      handle.setAttribute("aria-label", text ? text : "slider");
    });
    root.querySelectorAll(".cell img:not([alt])").forEach(function (img) {
      var cell = img.closest(".cell");
      var alt = cell && cell.querySelector(".mha-cell-alt");
      img.setAttribute("alt", alt ? alt.dataset.alt : "a figure of this cell");
    });
  }
  function watch() {
    labelWidgets(document);
    new MutationObserver(function () { labelWidgets(document); })
      .observe(document.body, { childList: true, subtree: true });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", watch); } else { watch(); }
})();
