/* MathJax for the site, loaded once the page is parsed (the site's `mathjax_path`, _config.yml).

   Sphinx adds MathJax as a deferred script, and a deferred script runs before DOMContentLoaded:
   evaluating MathJax's 1.2 MB bundle (about 230 ms on the book's 2-core machine) held up
   DOMContentLoaded on every page with maths. This loader, deferred in its place, adds the same
   bundle (served from _static/mathjax by sphinx-mathjax-offline, nothing fetched off the site)
   as an async script when the page is parsed; MathJax then reads its configuration
   (window.MathJax, set by Sphinx's inline script) and typesets as before, a moment later. */
(function () {
  "use strict";
  const src = new URL("mathjax/tex-chtml.js", document.currentScript.src).href;
  function load() {
    const s = document.createElement("script");
    s.id = "MathJax-script";
    s.src = src;
    s.async = true;
    document.head.appendChild(s);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", load, {once: true});
  else load();
})();
