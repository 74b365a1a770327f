<?php
// php_curl.php URL N - PHP's curl extension (Debian php-curl), a new
// handle per request with "Connection: close", as scripts use it.  Prints
// per request the status and the body.
$url = $argv[1];
$n = (int)$argv[2];
for ($i = 1; $i <= $n; $i++) {
	$ch = curl_init($url);
	curl_setopt($ch, CURLOPT_RETURNTRANSFER, true);
	curl_setopt($ch, CURLOPT_HTTPHEADER, ["Connection: close"]);
	$body = curl_exec($ch);
	echo "== ", $i, " ", curl_getinfo($ch, CURLINFO_HTTP_CODE), "\n", $body;
	curl_close($ch);
}
