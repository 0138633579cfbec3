"""Standard library only: what tarn-launcher.pyz ships (it runs in a stock Triton image, before
anything is installed): the launcher, the option declaration, WebHDFS, HDFS's checksum, JCEKS and
Hadoop's *-site.xml. The rest of TARN imports these too. tests/unit/test_layout.py enforces the rule."""
