export default {
  render({ el }) {
    el.style.display = "none";
    let root = null;
    const name = () => {
      root = root || el.closest(".nb-playground");
      if (!root) return;
      for (const box of root.querySelectorAll(".widget-slider, .widget-hslider")) {
        const label = box.querySelector(".widget-label");
        const words = label ? label.textContent.trim() : "";
        for (const handle of box.querySelectorAll('[role="slider"]')) {
          if (words && handle.getAttribute("aria-label") !== words) {
            handle.setAttribute("aria-label", words);
          }
        }
      }
    };
    const watch = new MutationObserver(name);
    const start = () => {
      name();
      if (root) watch.observe(root, { childList: true, subtree: true });
      else setTimeout(start, 50);
    };
    start();
    return () => watch.disconnect();
  },
};
