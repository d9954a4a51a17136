# Settings of a stock Scrapy project: nothing about the frontier here.
BOT_NAME = "stock"
SPIDER_MODULES = ["stock.spiders"]
ROBOTSTXT_OBEY = True
LOG_LEVEL = "INFO"
TELNETCONSOLE_ENABLED = False
