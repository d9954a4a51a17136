# Settings of the test project (tests/test_scrapy_features.py).
BOT_NAME = "probe"
SPIDER_MODULES = ["probe.spiders"]
SCHEDULER = "frontera_linkrank.scrapy.LinkRankScheduler"
SPIDER_MIDDLEWARES = {"frontera_linkrank.scrapy.LinkRankSpiderMiddleware": 30}
LINKRANK_SYNC = False
LINKRANK_LOG_INTERVAL = 0
ROBOTSTXT_OBEY = True
LOG_LEVEL = "INFO"
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False
