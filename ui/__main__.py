from ui.app import launch

launch()
