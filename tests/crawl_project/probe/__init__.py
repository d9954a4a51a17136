"""Test project: a spider exercising the frontier's Scrapy features."""
